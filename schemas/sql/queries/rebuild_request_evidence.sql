-- Rebuild request_evidence from its definition (after the definition changed).
DELETE FROM request_evidence;
INSERT INTO request_evidence SELECT * FROM request_evidence_live;
