-- engine: clickhouse
-- Mutations of the store's tables not finished, with why the last try failed: after an erase
-- (queries/erase_traces.sql) waited for its own, any left means rows may still be there.
SELECT table, command, latest_fail_reason FROM system.mutations
WHERE database = currentDatabase() AND NOT is_done
ORDER BY create_time;
