SELECT request_id FROM requests WHERE trace_id = $trace_id;
