-- One page of requests with what reference grading reads: the question, the answer and the
-- text of every chunk, in request_id order so pages stay put while new requests arrive
-- (collector/query/reads.py, run_request_texts; filters as in parts/filters.sql).
{% from "parts/metric_inputs.sql" import facts %}
WITH page AS (
    SELECT request_id FROM {{ facts(filters, grader) }}
    ORDER BY request_id
    LIMIT $limit OFFSET $offset
)
SELECT
    r.trace_id,
    r.question,
    r.answer,
    coalesce(list({'chunk_id': c.chunk_id, 'text': t.text} ORDER BY c.ordinal)
                 FILTER (WHERE c.chunk_id IS NOT NULL), []) AS chunks
FROM page
JOIN requests r USING (request_id)
LEFT JOIN chunks c USING (request_id)
LEFT JOIN chunk_texts t USING (text_hash)
GROUP BY r.request_id, r.trace_id, r.question, r.answer
ORDER BY r.request_id
