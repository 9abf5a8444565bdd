SELECT trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, service, scope,
       status_code, dropped_attributes_count, attributes, resource, text_refs
FROM spans
{% if engine == "clickhouse" -%}
-- ClickHouse: a span sent twice may be stored twice until a merge; the first copy counts
WHERE has({trace_ids:Array(String)}, trace_id)
ORDER BY received_at;
{%- else -%}
WHERE trace_id IN (SELECT unnest($trace_ids));
{%- endif %}
