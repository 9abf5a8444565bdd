-- metric: Cost: requests, prompt and output tokens, cost in US dollars (reported by the app, else estimated from its tokens and the price table) and cost per correct answer.
-- keys:
-- docs/metrics.md, "Cost". One row (per group), zeros on no data.
{% from "parts/cost.sql" import costed, COST_COUNTS, cost_rates %}
CREATE OR REPLACE VIEW cost_summary AS
WITH counts AS (
    SELECT {{ groups }}
{%- for name, aggregate in COST_COUNTS %}
        {{ aggregate }} AS {{ name }}{{ "," if not loop.last }}
{%- endfor %}
    FROM {{ costed(facts) }} f
    GROUP BY ALL
)
SELECT {{ groups }}
    requests, priced, reported, estimated, example_priced, prompt_tokens, output_tokens,
    reported_cost_usd, estimated_cost_usd, graded, correct, graded_cost_usd, priced_correct,
    {{ cost_rates() }}
FROM counts
ORDER BY {{ groups }} requests DESC;
