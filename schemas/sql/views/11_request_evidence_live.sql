-- The definition of the request_evidence table: one row per request with its filter and
-- group-by columns and every fact that needs its chunks, placements or merged outcome, but
-- none of the settings (bands are applied in request_facts from the decisive_*_position
-- columns). The store keeps request_evidence equal to this view: it recomputes the rows of
-- each trace it writes or grades and rebuilds the table when this definition changes. For
-- that it renders this query under a `scope` (parts/scope.sql): each request_in_scope(x) and
-- trace_in_scope(x) becomes a filter on the requests being refreshed, and request_outcomes is
-- inlined, limited alike (relation(), schemas/sql/sqlfiles.py), so a refresh reads only those
-- requests (collector/storage/store.py). Query this view directly to check the table.
--
-- Decisive chunks (docs/architecture.md, "decisive position"): the merged outcome's decisive_chunk_ids
-- when it names any; else the chunks the app marked decisive; else the chunks it labelled
-- direct_answer or exception_constraint. decisive_source says which rule applied.
--
-- Answer sources (docs/metrics.md, "Answer sources"): the chunks the answer follows, from the
-- answer_sources table; n_followed counts them, follows_decisive says whether one is
-- decisive, followed_distractors lists the others that are in the prompt, each at its first
-- occurrence (slot, relative position), for answered_from_distractor to band.
{% from "parts/scope.sql" import request_in_scope, scoped with context %}
{% from "parts/dialect.sql" import arg_min, bare, bool_or, iso_week, list_contains, list_distinct, list_len, semi_join, sorted_distinct, unnest with context -%}
CREATE OR REPLACE VIEW request_evidence_live AS
WITH req AS (
    SELECT * FROM {{ scoped("requests") }} r WHERE {{ request_in_scope("r") }}
), chunk AS (
    SELECT * FROM {{ scoped("chunks") }} c WHERE {{ request_in_scope("c") }}
), merged AS (
    SELECT r.request_id, o.correct, o.score, o.graded_at, o.grader,
           o.correct_person, o.correct_references, o.correct_judge,
           o.score_person, o.score_references, o.score_judge,
           {{ list_distinct("o.decisive_chunk_ids") }} AS decisive_chunk_ids,
           {{ list_distinct("o.required_constraints") }} AS required_constraints,
           o.recalled_constraints
{%- if engine == "clickhouse" -%}
           , o.required_constraints_set
{%- endif %}
    FROM req r
    JOIN {{ relation("request_outcomes") }} o ON o.trace_id = r.trace_id
), placed AS (
    SELECT
        p.request_id,
        p.chunk_id,
        row_number() OVER (PARTITION BY p.request_id ORDER BY p.prompt_index) AS slot,
        count(*) OVER (PARTITION BY p.request_id) AS k,
        p.token_start,
        p.token_end,
        coalesce(nullif(r.prompt_tokens, 0),
                 nullif(max(p.token_end) OVER (PARTITION BY p.request_id), 0)) AS prompt_tokens
    FROM {{ scoped("placements") }} p
    JOIN req r USING (request_id)
    WHERE {{ request_in_scope("p") }}
), positioned AS (
    SELECT request_id, chunk_id, slot, k,
           relative_position(token_start, token_end, prompt_tokens, slot, k) AS relative_position
    FROM placed
), named AS (
    SELECT request_id, decisive_chunk_ids FROM merged WHERE {{ list_len("decisive_chunk_ids") }} > 0
), marked AS (
    SELECT DISTINCT request_id FROM chunk WHERE decisive
), decisive AS (
    SELECT request_id, chunk_id, 'outcome' AS source
    FROM (SELECT request_id, {{ unnest("decisive_chunk_ids") }} AS chunk_id FROM named)
    UNION ALL
    SELECT request_id, chunk_id, 'marked' AS source
    FROM chunk
    WHERE decisive AND request_id NOT IN (SELECT request_id FROM named)
    UNION ALL
    SELECT request_id, chunk_id, 'label' AS source
    FROM chunk
    WHERE label IN ('direct_answer', 'exception_constraint')
      AND request_id NOT IN (SELECT request_id FROM named)
      AND request_id NOT IN (SELECT request_id FROM marked)
), cited AS (
    -- a chunk is cited when the app marked it cited or the answer's cited_ids name it
    SELECT c.request_id, c.chunk_id, c.source_id, c.authority
    FROM chunk c
    JOIN req r USING (request_id)
    WHERE coalesce(c.cited, false) OR coalesce({{ list_contains("r.cited_ids", "c.chunk_id") }}, false)
), decisive_chunk AS (
    SELECT
        {{ bare("d.request_id") }},
        {{ bare("d.chunk_id") }},
        d.source,
        c.request_id IS NOT NULL AS retrieved,
        CASE WHEN c.request_id IS NOT NULL THEN coalesce(c.retrieval_rank, c.ordinal + 1) END
            AS retrieval_rank,
        ct.request_id IS NOT NULL OR coalesce({{ list_contains("r.cited_ids", "d.chunk_id") }}, false) AS cited
    FROM decisive d
    JOIN req r USING (request_id)
    LEFT JOIN chunk c ON c.request_id = d.request_id AND c.chunk_id = d.chunk_id
    LEFT JOIN cited ct ON ct.request_id = d.request_id AND ct.chunk_id = d.chunk_id
), decisive_placed AS (
    SELECT pp.request_id, pp.chunk_id, pp.slot, pp.relative_position
    FROM positioned pp
    {{ semi_join() }} decisive d ON d.request_id = pp.request_id AND d.chunk_id = pp.chunk_id
), decisive_first AS (
    -- each in-prompt decisive chunk at its first occurrence, for ranking metrics
    SELECT request_id, chunk_id, min(slot) AS slot
    FROM decisive_placed
    GROUP BY request_id, chunk_id
), per_request_decisive AS (
    SELECT
        request_id,
        any_value(source) AS decisive_source,
        count(*) AS n_decisive,
        count(*) FILTER (WHERE retrieved) AS n_decisive_retrieved,
        min(retrieval_rank) AS best_retrieval_rank,
        sum(1 / log2(retrieval_rank + 1)) AS retrieval_dcg,
        {{ bool_or("cited") }} AS cites_decisive
    FROM decisive_chunk
    GROUP BY request_id
), per_request_placed AS (
    SELECT
        request_id,
        count(DISTINCT chunk_id) AS n_decisive_in_prompt,
        min(slot) AS decisive_slot,
        {{ arg_min("relative_position", "slot") }} AS decisive_position,
        min(relative_position) AS decisive_min_position,
        max(relative_position) AS decisive_max_position
    FROM decisive_placed
    GROUP BY request_id
), per_request_first AS (
    SELECT request_id, sum(1 / log2(slot + 1)) AS prompt_dcg
    FROM decisive_first
    GROUP BY request_id
), source AS (
    SELECT DISTINCT s.request_id, s.chunk_id FROM {{ scoped("answer_sources") }} s WHERE {{ request_in_scope("s") }}
), source_first AS (
    SELECT pp.request_id, pp.chunk_id, min(pp.slot) AS slot,
           {{ arg_min("pp.relative_position", "pp.slot") }} AS relative_position
    FROM positioned pp
    {{ semi_join() }} source s ON s.request_id = pp.request_id AND s.chunk_id = pp.chunk_id
    GROUP BY pp.request_id, pp.chunk_id
), per_request_source AS (
    SELECT
        {{ bare("s.request_id") }},
        count(*) AS n_followed,
        {{ bool_or("d.chunk_id IS NOT NULL") }} AS follows_decisive,
{%- if engine == "clickhouse" %}
        arraySort(x -> x.2, groupArrayIf(
            CAST((s.chunk_id, CAST(sf.slot AS INTEGER), sf.relative_position),
                 'Tuple(chunk_id Nullable(String), slot Nullable(Int32), relative_position Nullable(Float64))'),
            d.chunk_id IS NULL AND sf.slot IS NOT NULL)) AS followed_distractors
{%- else %}
        list({'chunk_id': s.chunk_id, 'slot': CAST(sf.slot AS INTEGER),
              'relative_position': sf.relative_position} ORDER BY sf.slot)
            FILTER (WHERE d.chunk_id IS NULL AND sf.slot IS NOT NULL) AS followed_distractors
{%- endif %}
    FROM source s
    LEFT JOIN source_first sf ON sf.request_id = s.request_id AND sf.chunk_id = s.chunk_id
    LEFT JOIN (SELECT DISTINCT request_id, chunk_id FROM decisive) d
        ON d.request_id = s.request_id AND d.chunk_id = s.chunk_id
    GROUP BY s.request_id
), prompt_size AS (
    SELECT request_id, count(*) AS k FROM placed GROUP BY request_id
), chunk_count AS (
    SELECT request_id, count(*) AS n_chunks FROM chunk GROUP BY request_id
), per_request_cited AS (
    SELECT
        c.request_id,
        {{ bool_or("c.authority IS NOT NULL AND c.authority <> 'canonical'") }} AS cites_noncanonical,
        -- sorted: a DISTINCT list comes in no set order, and the same trace must give the
        -- same row however its rows were stored
{%- if engine == "clickhouse" %}
        arraySort(groupUniqArrayIf(
            CAST((c.source_id, c.authority), 'Tuple(source_id Nullable(String), authority Nullable(String))'),
            d.chunk_id IS NULL AND c.source_id IS NOT NULL)) AS cited_other_sources
{%- else %}
        list_sort(list(DISTINCT {'source_id': c.source_id, 'authority': c.authority})
            FILTER (WHERE d.chunk_id IS NULL AND c.source_id IS NOT NULL)) AS cited_other_sources
{%- endif %}
    FROM cited c
    LEFT JOIN decisive d ON d.request_id = c.request_id AND d.chunk_id = c.chunk_id
    GROUP BY c.request_id
), cited_placed AS (
    -- where the cited chunks sat: the distinct relative positions of their occurrences in the
    -- prompt, banded with the settings when read (citation_positions)
    SELECT pp.request_id, {{ sorted_distinct("pp.relative_position") }} AS cited_positions
    FROM positioned pp
    {{ semi_join() }} cited c ON c.request_id = pp.request_id AND c.chunk_id = pp.chunk_id
    GROUP BY pp.request_id
), cited_count AS (
    -- distinct cited ids: chunks marked cited plus every id in cited_ids
    SELECT request_id, count(DISTINCT chunk_id) AS n_cited
    FROM (
        SELECT request_id, chunk_id FROM cited
        UNION ALL
        SELECT request_id, {{ unnest("cited_ids") }} AS chunk_id FROM req
    )
    GROUP BY request_id
)
SELECT
    {{ bare("r.request_id") }},
    r.trace_id,
    r.time,
    coalesce(r.kind, 'rag') AS kind,
    {{ iso_week("r.time") }} AS week,
    r.service,
    r.model,
    r.template_id AS template,
    r.strategy,
    r.experiment_id AS experiment,
    r.condition,
    r.case_id,
    context_bucket(r.prompt_tokens) AS context_bucket,
    r.prompt_tokens,
    r.confidence,
    m.correct,
    m.score,
    m.graded_at,
    m.grader,
    m.correct_person,
    m.correct_references,
    m.correct_judge,
    m.score_person,
    m.score_references,
    m.score_judge,
    CAST(coalesce(ps.k, 0) AS INTEGER) AS k,
    CAST(coalesce(cc.n_chunks, 0) AS INTEGER) AS n_chunks,
    prd.decisive_source,
    CAST(coalesce(prd.n_decisive, 0) AS INTEGER) AS n_decisive,
    CAST(coalesce(prd.n_decisive_retrieved, 0) AS INTEGER) AS n_decisive_retrieved,
    CAST(coalesce(prp.n_decisive_in_prompt, 0) AS INTEGER) AS n_decisive_in_prompt,
    CAST(prp.decisive_slot AS INTEGER) AS decisive_slot,
    prp.decisive_position,
    prp.decisive_min_position,
    prp.decisive_max_position,
    CASE WHEN prd.n_decisive > 0 THEN coalesce(1 / prd.best_retrieval_rank, 0) END AS retrieval_rr,
    CASE WHEN prd.n_decisive > 0 THEN
        coalesce(prd.retrieval_dcg / ideal_dcg(least(prd.n_decisive, coalesce(cc.n_chunks, 0))), 0)
    END AS retrieval_ndcg,
    CASE WHEN prd.n_decisive > 0 THEN coalesce(1 / prp.decisive_slot, 0) END AS prompt_rr,
    CASE WHEN prd.n_decisive > 0 THEN
        coalesce(prf.prompt_dcg / ideal_dcg(least(prd.n_decisive, coalesce(ps.k, 0))), 0)
    END AS prompt_ndcg,
    CAST(coalesce(ncc.n_cited, 0) AS INTEGER) AS n_cited,
    coalesce(prd.cites_decisive, false) AS cites_decisive,
    coalesce(prc.cites_noncanonical, false) AS cites_noncanonical,
    prc.cited_other_sources,
    cp.cited_positions,
    -- answers compared across a sweep's conditions: citation markers ([3], [1, 4]) removed,
    -- since a placement renumbers the documents they point at; lower case, whitespace
    -- collapsed, trailing punctuation dropped
    CASE WHEN r.answer IS NOT NULL THEN
{%- if engine == "clickhouse" %}
        -- ClickHouse's own hash of the same text: a key is compared only with its engine's
        cityHash64(replaceRegexpAll(lowerUTF8(trimBoth(replaceRegexpAll(
            replaceRegexpAll(r.answer, '\\[\\s*\\d+(?:\\s*[,;]\\s*\\d+)*\\s*\\]', ' '),
            '\\s+', ' '))), '[\\s.!?;:,]+$', ''))
{%- else %}
        hash(regexp_replace(lower(trim(regexp_replace(
            regexp_replace(r.answer, '\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]', ' ', 'g'),
            '\s+', ' ', 'g'))), '[\s.!?;:,]+$', ''))
{%- endif %}
    END AS answer_key,
{%- if engine == "clickhouse" %}
    CAST(if(m.required_constraints_set, length(m.required_constraints), NULL) AS INTEGER) AS n_required,
    CAST(if(m.required_constraints_set,
            length(arrayIntersect(arrayDistinct(m.recalled_constraints), m.required_constraints)),
            NULL) AS INTEGER) AS n_recalled,
{%- else %}
    CAST(len(m.required_constraints) AS INTEGER) AS n_required,
    CAST(CASE WHEN m.required_constraints IS NOT NULL THEN
        len(list_intersect(list_distinct(coalesce(m.recalled_constraints, [])), m.required_constraints))
    END AS INTEGER) AS n_recalled,
{%- endif %}
    CAST(coalesce(prs.n_followed, 0) AS INTEGER) AS n_followed,
    coalesce(prs.follows_decisive, false) AS follows_decisive,
    prs.followed_distractors
FROM req r
LEFT JOIN merged m USING (request_id)
LEFT JOIN prompt_size ps USING (request_id)
LEFT JOIN chunk_count cc USING (request_id)
LEFT JOIN per_request_decisive prd USING (request_id)
LEFT JOIN per_request_placed prp USING (request_id)
LEFT JOIN per_request_first prf USING (request_id)
LEFT JOIN per_request_cited prc USING (request_id)
LEFT JOIN cited_placed cp USING (request_id)
LEFT JOIN cited_count ncc USING (request_id)
LEFT JOIN per_request_source prs USING (request_id);
