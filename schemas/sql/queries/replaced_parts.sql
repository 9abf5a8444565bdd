-- engine: clickhouse
-- Parts of the store's tables still on disk that a mutation or a merge replaced: after an
-- erase (queries/erase_traces.sql) they hold the erased rows until ClickHouse removes them.
SELECT count() AS parts, sum(bytes_on_disk) AS bytes FROM system.parts
WHERE database = currentDatabase() AND NOT active;
