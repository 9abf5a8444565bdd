-- The largest request and outcome ids in use: the store numbers new rows after them.
SELECT
    (SELECT coalesce(max(request_id), 0) FROM requests) AS request_id,
    (SELECT coalesce(max(outcome_id), 0) FROM outcomes) AS outcome_id;
