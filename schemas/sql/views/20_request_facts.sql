-- One row per request with every filter and group-by column and every per-request fact the
-- metric views aggregate. Filter and group-by keys are columns of the same name: week,
-- service, model, template, strategy, experiment, context_bucket. It reads the
-- request_evidence table (kept by the store) and applies the settings.
--
-- decisive_band: band of the request's decisive position (its first decisive chunk in prompt
-- order). decisive_at_edge: some occurrence of some in-prompt decisive chunk is early or late
-- (docs/architecture.md, "Placements": a chunk placed twice is at an edge if any occurrence is).
-- taxonomy_class (docs/architecture.md, "Failure taxonomy"): ungraded, answered, then for a graded-wrong
-- request unlabeled (no decisive chunk known), missing (no decisive chunk among its chunks),
-- dropped (retrieved, none in the prompt), unused (in the prompt, an occurrence at an edge),
-- buried (in the prompt, every occurrence in the middle band).
-- The `grader=` filter reads these facts through parts/graders.sql, which shares the
-- taxonomy_class and unsupported_confidence definitions below.
--
-- request_facts_all has a row for every request whatever its kind (docs/metrics.md, "Request
-- kinds"), for the requests list; request_facts, which every metric view reads, only the
-- `rag` ones: a retrieval with no LLM call or an LLM call with no retrieval is no answered
-- RAG request.
{% from "parts/graders.sql" import taxonomy_class, unsupported_confidence %}
{% from "parts/dialect.sql" import position_band, star_except with context -%}
CREATE OR REPLACE VIEW request_facts_all AS
WITH facts AS (
    SELECT
        {{ star_except("e.*", "decisive_min_position, decisive_max_position") }},
        {{ position_band("e.decisive_position") }} AS decisive_band,
        CASE WHEN e.n_decisive_in_prompt > 0 THEN
            e.decisive_min_position < s.early_end OR e.decisive_max_position >= s.late_start
        END AS decisive_at_edge,
        s.high_confidence
    FROM request_evidence e
    CROSS JOIN metric_settings s
)
SELECT
    {{ star_except("*", "high_confidence") }},
    CASE WHEN kind = 'rag' THEN {{ taxonomy_class("correct") }} END AS taxonomy_class,
    {{ unsupported_confidence("correct", "high_confidence") }} AS unsupported_confidence
FROM facts;

CREATE OR REPLACE VIEW request_facts AS
SELECT * FROM request_facts_all WHERE kind = 'rag';
