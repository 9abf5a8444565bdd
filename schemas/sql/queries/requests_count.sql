-- How many requests the requests list matches (collector/query/reads.py, run_requests).
{% from "parts/metric_inputs.sql" import facts with context %}
SELECT count(*) FROM {{ facts(filters, grader, every_kind=True) }}
