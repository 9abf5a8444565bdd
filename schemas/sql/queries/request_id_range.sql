SELECT min(request_id), max(request_id) FROM requests;
