-- Everything stored for the traces $trace_ids: derived rows and their request_evidence rows,
-- every outcome, the kept spans; then texts no remaining span or chunk refers to. A migration
-- that adds a table holding rows of a trace adds its delete here (tests/test_prune.py checks
-- every table of the file).
DELETE FROM request_evidence WHERE trace_id IN (SELECT unnest($trace_ids));
DELETE FROM chunks WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM answer_sources WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM placements WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM requests WHERE trace_id IN (SELECT unnest($trace_ids));
DELETE FROM outcomes WHERE trace_id IN (SELECT unnest($trace_ids));
DELETE FROM spans WHERE trace_id IN (SELECT unnest($trace_ids));
DELETE FROM texts WHERE text_hash NOT IN (
    SELECT DISTINCT unnest(text_refs) FROM spans WHERE text_refs IS NOT NULL);
DELETE FROM chunk_texts WHERE text_hash NOT IN (
    SELECT text_hash FROM chunks WHERE text_hash IS NOT NULL);
