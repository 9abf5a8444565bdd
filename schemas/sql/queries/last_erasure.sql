-- engine: clickhouse
-- When traces were last erased from the store (queries/record_erasure.sql), NULL if never.
SELECT max(since) AS since FROM pending_work WHERE name = 'erased';
