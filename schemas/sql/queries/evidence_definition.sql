-- Which SQL built the request_evidence table (see derived_state in migration 002).
SELECT definition_hash FROM derived_state WHERE name = 'request_evidence';
