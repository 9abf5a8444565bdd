-- engine: clickhouse
-- That traces are being erased now (collector/storage/clickhouse_erase.py), in pending_work
-- under the name 'erased', before any text is deleted: a writer remembers which texts it stored
-- and does not insert them again, so each writer forgets them when this time changes
-- (queries/last_erasure.sql). One row per erase; the newest counts.
INSERT INTO pending_work (name, since) VALUES ('erased', now64(6, 'UTC'));
