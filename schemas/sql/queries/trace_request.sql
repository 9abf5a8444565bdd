{% from "parts/filters.sql" import param with context -%}
-- One request for the trace inspector: the stored request, its per-request facts, of any
-- kind (docs/metrics.md, "Request kinds"), and what it cost (request_costs: r.cost_usd is the
-- cost the app reported).
SELECT r.*,
       c.estimated_cost_usd, c.cost_source, c.example_price,
       f.week, f.context_bucket, f.k, f.correct, f.score, f.decisive_source, f.n_decisive,
       f.n_decisive_retrieved, f.n_decisive_in_prompt, f.decisive_slot, f.decisive_position,
       f.decisive_band, f.decisive_at_edge, f.n_cited, f.cites_decisive, f.cites_noncanonical,
       f.n_required, f.n_recalled, f.unsupported_confidence, f.taxonomy_class
FROM requests r
JOIN request_facts_all f USING (request_id)
JOIN request_costs c USING (request_id)
WHERE r.request_id = {{ param("r", "Int64") }};
