-- engine: clickhouse
-- Keep `days` days of rows (the ClickHouse counterpart of `midtrace prune --older-than`): a
-- TTL on every day-partitioned table, by the time each row belongs to (a span's start, a
-- request's time, an outcome's arrival). A DDL statement takes no parameters: `days` is an
-- integer the caller checked. texts and chunk_texts, shared by hash among traces, are kept.
{% set tables = [
    ("spans", "toDate(fromUnixTimestamp64Nano(start_ns, 'UTC'))"),
    ("derivations", "toDate(time)"),
    ("requests_versions", "toDate(time)"),
    ("chunks_versions", "toDate(time)"),
    ("placements_versions", "toDate(time)"),
    ("answer_sources_versions", "toDate(time)"),
    ("outcomes_versions", "toDate(received_at)"),
    ("request_evidence_versions", "toDate(assumeNotNull(time))"),
] -%}
{% for table, day in tables -%}
ALTER TABLE {{ table }} MODIFY TTL {{ day }} + INTERVAL {{ days | int }} DAY;
{% endfor -%}
