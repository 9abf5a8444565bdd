{% from "parts/filters.sql" import param with context -%}
-- Every outcome received for one trace, in arrival order, for the trace inspector.
{% from "parts/dialect.sql" import star_except with context -%}
SELECT {{ star_except("*", "trace_id") }} FROM outcomes WHERE trace_id = {{ param("trace_id") }} ORDER BY outcome_id;
