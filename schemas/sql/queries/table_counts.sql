SELECT
    (SELECT count(*) FROM spans) AS spans,
    (SELECT count(*) FROM requests) AS requests,
    (SELECT count(*) FROM chunks) AS chunks,
    (SELECT count(*) FROM placements) AS placements,
    (SELECT count(*) FROM outcomes) AS outcomes,
    (SELECT count(*) FROM chunk_texts) AS chunk_texts,
    (SELECT count(*) FROM texts) AS texts;
