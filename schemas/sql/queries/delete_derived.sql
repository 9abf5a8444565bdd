-- The derived rows of the traces being re-normalized; posted outcomes are never deleted.
DELETE FROM chunks WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM request_evidence WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM answer_sources WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM placements WHERE request_id IN (
    SELECT request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids)));
DELETE FROM requests WHERE trace_id IN (SELECT unnest($trace_ids));
DELETE FROM outcomes WHERE origin = 'span' AND trace_id IN (SELECT unnest($trace_ids));
