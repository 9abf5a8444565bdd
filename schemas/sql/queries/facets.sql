-- The distinct values of each equality filter and the time range of the requests, for the
-- filter pickers (collector/query/reads.py, run_facets). Context buckets come unordered.
-- The requests of each kind (docs/metrics.md, "Request kinds") are counted too.
{% from "parts/dialect.sql" import sorted_distinct with context -%}
SELECT
{%- if engine == "clickhouse" %}
    {{ sorted_distinct("service") }} AS service,
    {{ sorted_distinct("model") }} AS model,
    {{ sorted_distinct("template_id") }} AS template,
    {{ sorted_distinct("strategy") }} AS strategy,
    {{ sorted_distinct("experiment_id") }} AS experiment,
    {{ sorted_distinct("context_bucket(prompt_tokens)") }} AS context_bucket,
{%- else %}
    coalesce(list(DISTINCT service ORDER BY service) FILTER (WHERE service IS NOT NULL), [])
        AS service,
    coalesce(list(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL), []) AS model,
    coalesce(list(DISTINCT template_id ORDER BY template_id) FILTER (WHERE template_id IS NOT NULL), [])
        AS template,
    coalesce(list(DISTINCT strategy ORDER BY strategy) FILTER (WHERE strategy IS NOT NULL), [])
        AS strategy,
    coalesce(list(DISTINCT experiment_id ORDER BY experiment_id) FILTER (WHERE experiment_id IS NOT NULL), [])
        AS experiment,
    coalesce(list(DISTINCT context_bucket(prompt_tokens)), []) AS context_bucket,
{%- endif %}
    min(time) AS min_time,
    max(time) AS max_time,
    count(*) AS requests,
    count(*) FILTER (WHERE coalesce(kind, 'rag') = 'rag') AS rag,
    count(*) FILTER (WHERE kind = 'retrieval_only') AS retrieval_only,
    count(*) FILTER (WHERE kind = 'llm_only') AS llm_only
FROM requests;
