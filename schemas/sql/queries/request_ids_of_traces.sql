SELECT trace_id, request_id FROM requests WHERE trace_id IN (SELECT trace_id FROM _trace_ids);
