-- Recompute the request_evidence rows of the requests in _refresh_ids (request ids between
-- $lo and $hi, the bounds let DuckDB skip the row groups of older requests).
INSERT INTO request_evidence
SELECT * FROM request_evidence_live
WHERE request_id BETWEEN $lo AND $hi
  AND request_id IN (SELECT request_id FROM _refresh_ids);
