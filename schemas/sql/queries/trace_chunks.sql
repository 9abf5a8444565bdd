{% from "parts/filters.sql" import param with context -%}
{% from "parts/dialect.sql" import list_contains, texts_of with context -%}
{#- ClickHouse: a scalar subquery over no rows (no outcome) cannot be an array; any() over
    none gives the empty one. -#}
{% set decisive_ids = "(SELECT any(decisive_chunk_ids) FROM outcome)" if engine == "clickhouse"
                      else "(SELECT decisive_chunk_ids FROM outcome)" -%}
-- The chunks of one request in the order the app listed them, text inline, with whether
-- each is decisive (by the request's rule) and cited.
WITH facts AS (
    SELECT decisive_source FROM request_evidence WHERE request_id = {{ param("r", "Int64") }}
), outcome AS (
    SELECT o.decisive_chunk_ids
    FROM requests r JOIN request_outcomes o USING (trace_id)
    WHERE r.request_id = {{ param("r", "Int64") }}
)
SELECT
    c.chunk_id, c.ordinal, c.stage, c.drop_reason, c.source_id, c.source_position,
    c.retrieval_rank, c.retrieval_score, c.rerank_rank, c.rerank_score, c.label, c.authority,
    c.updated, c.decisive AS marked_decisive,
    coalesce(CASE (SELECT decisive_source FROM facts)
        WHEN 'outcome' THEN {{ list_contains(decisive_ids, "c.chunk_id") }}
        WHEN 'marked' THEN c.decisive
        WHEN 'label' THEN c.label IN ('direct_answer', 'exception_constraint')
    END, false) AS is_decisive,
    coalesce(c.cited, false) OR coalesce({{ list_contains("r.cited_ids", "c.chunk_id") }}, false) AS is_cited,
    c.text_chars,
    t.text
FROM chunks c
JOIN requests r USING (request_id)
LEFT JOIN {{ texts_of("chunk_texts", "SELECT text_hash FROM chunks WHERE request_id = " ~ param("r", "Int64")) }} t USING (text_hash)
WHERE c.request_id = {{ param("r", "Int64") }}
ORDER BY c.ordinal;
