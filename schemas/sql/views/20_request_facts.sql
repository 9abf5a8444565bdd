-- One row per request with every filter and group-by column and every per-request fact the
-- metric views aggregate. Filter and group-by keys are columns of the same name: week,
-- service, model, template, strategy, experiment, context_bucket.
--
-- decisive_band: band of the request's decisive position (its first decisive chunk in prompt
-- order). decisive_at_edge: some occurrence of some in-prompt decisive chunk is early or late
-- (DESIGN.md, "Placements": a chunk placed twice is at an edge if any occurrence is).
-- taxonomy_class (DESIGN.md, "Failure taxonomy"): ungraded, answered, then for a graded-wrong
-- request unlabeled (no decisive chunk known), missing (no decisive chunk among its chunks),
-- dropped (retrieved, none in the prompt), unused (in the prompt, an occurrence at an edge),
-- buried (in the prompt, every occurrence in the middle band).
CREATE OR REPLACE VIEW request_facts AS
WITH facts AS (
    SELECT
        r.request_id,
        r.trace_id,
        r.time,
        CAST(date_trunc('week', timezone('UTC', r.time)) AS DATE) AS week,
        r.service,
        r.model,
        r.template_id AS template,
        r.template_version,
        r.strategy,
        r.experiment_id AS experiment,
        r.condition,
        r.case_id,
        r.question,
        context_bucket(r.prompt_tokens) AS context_bucket,
        r.prompt_tokens,
        r.tokens_estimated,
        r.confidence,
        coalesce(e.k, 0) AS k,
        coalesce(e.n_chunks, 0) AS n_chunks,
        e.correct,
        e.score,
        e.graded_at,
        e.decisive_source,
        coalesce(e.n_decisive, 0) AS n_decisive,
        coalesce(e.n_decisive_retrieved, 0) AS n_decisive_retrieved,
        coalesce(e.n_decisive_in_prompt, 0) AS n_decisive_in_prompt,
        e.decisive_slot,
        e.decisive_position,
        CASE
            WHEN e.decisive_position IS NULL THEN NULL
            WHEN e.decisive_position < s.early_end THEN 'early'
            WHEN e.decisive_position < s.late_start THEN 'middle'
            ELSE 'late'
        END AS decisive_band,
        CASE WHEN e.n_decisive_in_prompt > 0 THEN
            e.decisive_min_position < s.early_end OR e.decisive_max_position >= s.late_start
        END AS decisive_at_edge,
        e.retrieval_rr,
        e.retrieval_ndcg,
        e.prompt_rr,
        e.prompt_ndcg,
        coalesce(e.n_cited, 0) AS n_cited,
        coalesce(e.cites_decisive, false) AS cites_decisive,
        coalesce(e.cites_noncanonical, false) AS cites_noncanonical,
        e.cited_other_sources,
        e.n_required,
        e.n_recalled,
        s.high_confidence
    FROM requests r
    LEFT JOIN request_evidence e USING (request_id)
    CROSS JOIN metric_settings s
)
SELECT
    * EXCLUDE (high_confidence),
    CASE
        WHEN correct IS NULL THEN 'ungraded'
        WHEN correct THEN 'answered'
        WHEN n_decisive = 0 THEN 'unlabeled'
        WHEN n_decisive_retrieved = 0 THEN 'missing'
        WHEN n_decisive_in_prompt = 0 THEN 'dropped'
        WHEN decisive_at_edge THEN 'unused'
        ELSE 'buried'
    END AS taxonomy_class,
    coalesce(correct = false AND n_decisive_in_prompt > 0 AND confidence >= high_confidence, false)
        AS unsupported_confidence
FROM facts;
