{% from "parts/filters.sql" import param with context -%}
{% from "parts/dialect.sql" import unnest with context -%}
SELECT trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, service, scope,
       status_code, dropped_attributes_count, attributes, resource, text_refs
FROM spans
WHERE trace_id IN (SELECT {{ unnest(param("trace_ids", "Array(String)")) }});
