-- engine: clickhouse
-- The names the views read, over ClickHouse's versioned tables (migrations/001_core.sql): the
-- rows of each request's newest derivation only, once each (two derivations of the same spans
-- may tie: their rows are the same). Created after the migrations, each time the store opens,
-- since a ClickHouse view keeps the columns its `*` had when it was created.
-- The newest derivation of each request (a tie is two derivations of the same spans).
CREATE OR REPLACE VIEW current_derivations AS
SELECT request_id, any(trace_id) AS trace_id, max(v) AS version, argMax(has_request, v) AS has_request
FROM (SELECT request_id, trace_id, version AS v, has_request FROM derivations)
GROUP BY request_id;

CREATE OR REPLACE VIEW requests AS
SELECT * EXCEPT (version) FROM requests_versions
WHERE (request_id, version) IN (SELECT request_id, version FROM current_derivations)
LIMIT 1 BY request_id;

CREATE OR REPLACE VIEW chunks AS
SELECT * EXCEPT (time, version) FROM chunks_versions
WHERE (request_id, version) IN (SELECT request_id, version FROM current_derivations)
LIMIT 1 BY request_id, ordinal;

CREATE OR REPLACE VIEW placements AS
SELECT * EXCEPT (time, version) FROM placements_versions
WHERE (request_id, version) IN (SELECT request_id, version FROM current_derivations)
LIMIT 1 BY request_id, prompt_index;

CREATE OR REPLACE VIEW outcomes AS
SELECT * EXCEPT (version) FROM outcomes_versions
WHERE origin = 'api' OR (trace_id, version) IN (SELECT trace_id, version FROM current_derivations)
LIMIT 1 BY trace_id, outcome_id;

CREATE OR REPLACE VIEW answer_sources AS
SELECT * EXCEPT (seq, time, version) FROM answer_sources_versions
WHERE (request_id, version) IN (SELECT request_id, version FROM current_derivations)
LIMIT 1 BY request_id, seq;
