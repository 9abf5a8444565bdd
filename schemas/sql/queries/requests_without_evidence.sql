-- The requests that have no request_evidence row: every request has one (the view's), so
-- these are the ones a collector stored with their refresh deferred and stopped before it ran
-- (collector/storage/store.py, Store._refresh_missing).
SELECT r.request_id, r.trace_id
FROM requests r
WHERE NOT EXISTS (SELECT 1 FROM request_evidence e WHERE e.request_id = r.request_id);
