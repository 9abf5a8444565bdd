-- metric: Citation drift: citation alignment and the non-canonical citation share by ISO week (Monday, UTC), weeks without data included, with the change from the previous week when both weeks have at least min_n requests behind it.
-- keys: week
{% from "parts/weekly.sql" import week_grid, called_change with context %}
CREATE OR REPLACE VIEW citation_drift AS
WITH {{ week_grid(facts, groups, [
    ("requests", "count(*)"),
    ("citing", "count(*) FILTER (WHERE n_cited > 0)"),
    ("evidence_in_prompt", "count(*) FILTER (WHERE n_decisive_in_prompt > 0)"),
    ("aligned", "count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive)"),
    ("citing_noncanonical", "count(*) FILTER (WHERE cites_noncanonical)")]) }}, rates AS (
    SELECT *,
        aligned / nullif(evidence_in_prompt, 0) AS alignment,
        wilson_low(aligned, evidence_in_prompt) AS ci_low,
        wilson_high(aligned, evidence_in_prompt) AS ci_high,
        citing_noncanonical / nullif(citing, 0) AS noncanonical_share
    FROM filled
)
-- a change is called out only when both weeks have at least min_n (settings) in its denominator
SELECT rates.*,
    {{ called_change("alignment", "evidence_in_prompt") }},
    {{ called_change("noncanonical_share", "citing") }}
FROM rates, metric_settings s
WINDOW w AS ({{ partition }} ORDER BY week)
ORDER BY {{ groups }} week;
