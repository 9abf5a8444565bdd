{% if engine == "clickhouse" -%}
SELECT text_hash, any(text) AS text FROM texts
WHERE text_hash IN (
    SELECT arrayJoin(text_refs) FROM spans WHERE has({trace_ids:Array(String)}, trace_id))
GROUP BY text_hash;
{%- else -%}
SELECT text_hash, text FROM texts
WHERE text_hash IN (
    SELECT DISTINCT unnest(text_refs) FROM spans WHERE trace_id IN (SELECT unnest($trace_ids)));
{%- endif %}
