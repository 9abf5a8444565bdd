SELECT trace_id, request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids));
