{% from "parts/filters.sql" import param with context -%}
{% from "parts/dialect.sql" import unnest with context -%}
SELECT text_hash, text FROM texts
WHERE text_hash IN (
    SELECT DISTINCT {{ unnest("text_refs") }} FROM spans WHERE trace_id IN (SELECT {{ unnest(param("trace_ids", "Array(String)")) }}));
