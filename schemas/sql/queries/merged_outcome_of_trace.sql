{% from "parts/filters.sql" import param with context -%}
-- The merged outcome of one trace, for the trace inspector.
{% from "parts/dialect.sql" import star_except with context -%}
SELECT {{ star_except("*", "trace_id") }} FROM request_outcomes WHERE trace_id = {{ param("trace_id") }};
