DELETE FROM request_evidence WHERE request_id IN (SELECT unnest($request_ids));
