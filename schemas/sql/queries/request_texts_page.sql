-- One page of requests with what reference grading and the judge read: the question, the
-- answer and the text of every chunk with where it first sat in the prompt (`prompt_index`,
-- NULL when it was not placed), in request_id order so pages stay put while new requests arrive
-- (collector/query/reads.py, run_request_texts; filters as in parts/filters.sql).
{% from "parts/filters.sql" import param with context -%}
{% from "parts/metric_inputs.sql" import facts with context %}
{% from "parts/dialect.sql" import texts_of with context -%}
WITH page AS (
    SELECT request_id FROM {{ facts(filters, grader) }}
    ORDER BY request_id
    LIMIT {{ param("limit", "UInt64") }} OFFSET {{ param("offset", "UInt64") }}
), placed AS (
    SELECT p.request_id, p.chunk_id, min(p.prompt_index) AS prompt_index
    FROM placements p
    WHERE p.request_id IN (SELECT request_id FROM page)
    GROUP BY p.request_id, p.chunk_id
)
SELECT
    r.trace_id,
    r.question,
    r.answer,
{%- if engine == "clickhouse" %}
    arrayMap(x -> CAST(tuple(x.2, x.3, x.4),
                       'Tuple(chunk_id String, text Nullable(String), prompt_index Nullable(Int32))'),
             arraySort(x -> x.1, groupArrayIf((c.ordinal, c.chunk_id, t.text, pl.prompt_index),
                                              c.chunk_id IS NOT NULL))) AS chunks
{%- else %}
    coalesce(list({'chunk_id': c.chunk_id, 'text': t.text, 'prompt_index': pl.prompt_index}
                  ORDER BY c.ordinal)
                 FILTER (WHERE c.chunk_id IS NOT NULL), []) AS chunks
{%- endif %}
FROM page
JOIN requests r USING (request_id)
LEFT JOIN chunks c USING (request_id)
LEFT JOIN {{ texts_of("chunk_texts", "SELECT text_hash FROM chunks WHERE request_id IN (SELECT request_id FROM page)") }} t USING (text_hash)
LEFT JOIN placed pl ON pl.request_id = c.request_id AND pl.chunk_id = c.chunk_id
GROUP BY r.request_id, r.trace_id, r.question, r.answer
ORDER BY r.request_id
