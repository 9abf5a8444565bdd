{% if engine == "clickhouse" -%}
SELECT count() AS n, min(request_id) AS lo, max(request_id) AS hi FROM requests;
{%- else -%}
SELECT min(request_id), max(request_id) FROM requests;
{%- endif %}
