-- metric: The weekly review: requests, accuracy, buried rate and citation alignment per ISO week (Monday, UTC), weeks without data included as zero rows, with the change from the previous week when both weeks have at least min_n graded requests.
-- keys: week
{% from "parts/weekly.sql" import week_grid, called_change with context %}
CREATE OR REPLACE VIEW weekly_overview AS
WITH {{ week_grid(facts, groups, [
    ("requests", "count(*)"),
    ("graded", "count(correct)"),
    ("correct", "count(*) FILTER (WHERE correct)"),
    ("wrong", "count(*) FILTER (WHERE NOT correct)"),
    ("buried", "count(*) FILTER (WHERE taxonomy_class = 'buried')"),
    ("evidence_in_prompt", "count(*) FILTER (WHERE n_decisive_in_prompt > 0)"),
    ("citations_aligned", "count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive)")]) }}, rates AS (
    SELECT *,
        correct / nullif(graded, 0) AS accuracy,
        wilson_low(correct, graded) AS ci_low,
        wilson_high(correct, graded) AS ci_high,
        buried / nullif(wrong, 0) AS buried_rate,
        citations_aligned / nullif(evidence_in_prompt, 0) AS citation_alignment
    FROM filled
)
-- a change is called out only when both weeks have at least min_n (settings) in its denominator
SELECT rates.*,
    {{ called_change("accuracy", "graded") }},
    {{ called_change("buried_rate", "graded") }},
    {{ called_change("citation_alignment", "evidence_in_prompt") }}
FROM rates, metric_settings s
WINDOW w AS ({{ partition }} ORDER BY week)
ORDER BY {{ groups }} week;
