-- How many requests the requests list matches (collector/query/reads.py, run_requests).
{% from "parts/filters.sql" import where %}
SELECT count(*) FROM request_facts{{ where(filters) }}
