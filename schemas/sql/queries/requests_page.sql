-- One page of the requests list, newest first, with each request's question
-- (collector/query/reads.py, run_requests; filters as in parts/filters.sql). Requests of
-- every kind are listed (docs/metrics.md, "Request kinds"); only `rag` ones have a class.
{% from "parts/filters.sql" import param with context -%}
{% from "parts/metric_inputs.sql" import facts with context %}
WITH page AS (
    SELECT * FROM {{ facts(filters, grader, every_kind=True) }}
    ORDER BY time DESC, request_id DESC
    LIMIT {{ param("limit", "UInt64") }} OFFSET {{ param("offset", "UInt64") }}
)
SELECT
    page.trace_id, page.time, page.kind, page.service, page.model, page.template, page.strategy,
    page.experiment, page.condition, page.case_id, page.context_bucket, page.prompt_tokens,
    r.question, page.confidence, page.correct, page.grader, page.taxonomy_class, page.decisive_source,
    page.n_decisive, page.n_decisive_in_prompt, page.decisive_slot, page.decisive_band, page.k,
    page.n_cited, page.cites_decisive, page.cites_noncanonical,
    -- the band of a decisive occurrence at an edge (early when one is, else late): why an
    -- `unused` request is not `buried` although its first decisive chunk may sit mid-prompt
    CASE WHEN page.decisive_at_edge THEN
        CASE WHEN e.decisive_min_position < s.early_end THEN 'early' ELSE 'late' END
    END AS decisive_edge_band
FROM page
JOIN requests r USING (request_id)
JOIN request_evidence e USING (request_id)
CROSS JOIN metric_settings s
ORDER BY page.time DESC, page.request_id DESC
