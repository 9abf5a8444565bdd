-- metric: Cost per ISO week (Monday, UTC), weeks without data included as zero rows: requests, tokens, cost in US dollars (reported, else estimated from the price table) and cost per correct answer.
-- keys: week
-- docs/metrics.md, "Cost". Split by template and strategy with group_by=template,strategy.
{% from "parts/weekly.sql" import week_grid with context %}
{% from "parts/cost.sql" import costed, COST_COUNTS, cost_rates %}
CREATE OR REPLACE VIEW cost_by_week AS
WITH {{ week_grid(costed(facts), groups, COST_COUNTS) }}
SELECT {{ groups }}
    week, requests, priced, reported, estimated, example_priced, prompt_tokens, output_tokens,
    reported_cost_usd, estimated_cost_usd, graded, correct, graded_cost_usd, priced_correct,
    {{ cost_rates() }}
FROM filled
ORDER BY {{ groups }} week;
