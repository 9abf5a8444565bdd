{% from "parts/filters.sql" import param with context -%}
SELECT request_id FROM requests WHERE trace_id = {{ param("trace_id") }};
