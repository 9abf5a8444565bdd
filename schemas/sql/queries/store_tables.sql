-- The tables and views of the open database, to tell whether it holds a midtrace store
-- (midtrace/client.py, ClickHouseClient).
{% if engine == "clickhouse" -%}
SELECT name FROM system.tables WHERE database = currentDatabase();
{%- else -%}
SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()
UNION ALL
SELECT view_name FROM duckdb_views() WHERE database_name = current_database();
{%- endif %}
