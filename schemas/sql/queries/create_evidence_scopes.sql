-- engine: clickhouse
-- The copies a refresh of request_evidence reads (queries/fill_request_evidence.sql, scope
-- "traces"): the current rows of the refreshed requests, each copy under a `scope` of its own,
-- so writers refreshing at once never read each other's. ClickHouse analyses
-- request_evidence_live for about a second when its subqueries read the views of the newest
-- derivations (each reference of a subquery is analysed again), and a quarter of that when
-- they read plain tables. A copy is needed only while its refresh runs: whole hours of them
-- are dropped after an hour. Created after the views each time the store opens; a table whose
-- columns no longer match its view's is dropped first (collector/storage/clickhouse.py).
{% for name in scoped_tables %}
CREATE TABLE IF NOT EXISTS scoped_{{ name }}
ENGINE = MergeTree
PARTITION BY toStartOfHour(scoped_at)
ORDER BY scope
TTL scoped_at + INTERVAL 1 HOUR
SETTINGS ttl_only_drop_parts = 1, merge_with_ttl_timeout = 600
EMPTY AS SELECT toUUID('00000000-0000-0000-0000-000000000000') AS scope, now() AS scoped_at, *
FROM {{ name }};
{% endfor %}
