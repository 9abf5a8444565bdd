{#- The cost views' one definition (docs/metrics.md, "Cost"): cost_summary and cost_by_week
    count these over the request facts joined with request_costs.

    costed(facts): the facts with each request's output_tokens, cost_usd, cost_source and
    example_price.
    COST_COUNTS: (name, aggregate) of every count and sum, for parts/weekly.sql's week_grid.
    cost_rates(): the columns computed from those counts; cost_usd is NULL when no request
    of the row is priced. cost_per_correct is what one correct answer cost: the summed cost
    of the graded requests that have one over the correct answers among them (so ungraded
    traffic neither inflates nor dilutes it); NULL when none of them is correct. -#}
{%- macro costed(facts) -%}
(SELECT f.*, c.output_tokens, c.cost_usd, c.cost_source, c.example_price
    FROM {{ facts }} f JOIN request_costs c USING (request_id))
{%- endmacro -%}

{%- set COST_COUNTS = [
    ("requests", "count(*)"),
    ("priced", "count(cost_usd)"),
    ("reported", "count(*) FILTER (WHERE cost_source = 'reported')"),
    ("estimated", "count(*) FILTER (WHERE cost_source = 'estimated')"),
    ("example_priced", "count(*) FILTER (WHERE example_price)"),
    ("prompt_tokens", "CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT)"),
    ("output_tokens", "CAST(coalesce(sum(output_tokens), 0) AS BIGINT)"),
    ("total_cost_usd", "coalesce(sum(cost_usd), 0)"),
    ("reported_cost_usd", "coalesce(sum(cost_usd) FILTER (WHERE cost_source = 'reported'), 0)"),
    ("estimated_cost_usd", "coalesce(sum(cost_usd) FILTER (WHERE cost_source = 'estimated'), 0)"),
    ("graded", "count(correct)"),
    ("correct", "count(*) FILTER (WHERE correct)"),
    ("graded_cost_usd", "coalesce(sum(cost_usd) FILTER (WHERE correct IS NOT NULL), 0)"),
    ("priced_correct", "count(*) FILTER (WHERE correct AND cost_usd IS NOT NULL)"),
] -%}

{%- macro cost_rates() -%}
requests - priced AS unpriced,
        CASE WHEN priced > 0 THEN total_cost_usd END AS cost_usd,
        graded_cost_usd / nullif(priced_correct, 0) AS cost_per_correct
{%- endmacro -%}
