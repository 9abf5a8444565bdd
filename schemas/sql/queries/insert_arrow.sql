-- The rows of an Arrow table, `source`, appended to table `target`, its columns named in
-- `columns` (the Arrow table's column names). On ClickHouse (chdb) `source` is the name of
-- the Python variable holding the table, read by the Python() table function.
{% set names = columns | map("identifier") | join(", ") -%}
{% if engine == "clickhouse" -%}
INSERT INTO {{ target | identifier }} ({{ names }}) SELECT {{ names }} FROM Python({{ source }});
{%- else -%}
INSERT INTO {{ target | identifier }} ({{ names }}) SELECT {{ names }} FROM {{ source }};
{%- endif %}
