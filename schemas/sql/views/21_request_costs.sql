-- What each request cost (docs/metrics.md, "Cost"): the app's own figure when it sent one
-- (midtrace.request.cost_usd, or OpenInference's llm.cost.total), `cost_source` 'reported';
-- else its prompt and output tokens priced by the `prices` table (the price table the store
-- was last opened with, by model name), 'estimated'; else NULL (no model price, or a token
-- count unknown). `example_price`: the estimate used one of the shipped example prices.
CREATE OR REPLACE VIEW request_costs AS
WITH priced AS (
    SELECT
        r.request_id,
        r.model,
        r.prompt_tokens,
        r.output_tokens,
        r.cost_usd AS reported_cost_usd,
        (r.prompt_tokens * p.input_per_mtok + r.output_tokens * p.output_per_mtok) / 1e6
            AS estimated_cost_usd,
        p.example
    FROM requests r
    LEFT JOIN prices p ON p.model = r.model
)
SELECT
    request_id,
    model,
    prompt_tokens,
    output_tokens,
    reported_cost_usd,
    estimated_cost_usd,
    coalesce(reported_cost_usd, estimated_cost_usd) AS cost_usd,
    CASE WHEN reported_cost_usd IS NOT NULL THEN 'reported'
         WHEN estimated_cost_usd IS NOT NULL THEN 'estimated' END AS cost_source,
    coalesce(reported_cost_usd IS NULL AND estimated_cost_usd IS NOT NULL AND example, false)
        AS example_price
FROM priced;
