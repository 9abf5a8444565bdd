-- engine: clickhouse
-- What erasing the traces {trace_ids} (`midtrace prune --trace-id` on ClickHouse, collector/
-- storage/clickhouse_erase.py) deletes, read before anything is deleted: the request ids of
-- their rows in every version (those a derivation or a versioned row names, and each trace's
-- hashed id {hashed}, which a writer that stopped part way may have left rows under, unless
-- another trace's rows use it), the texts their spans refer to and the chunk texts their
-- chunks refer to (deleted only where nothing left refers to them), and what the report counts:
-- the traces it holds anything of (stored_traces/DuckDB), their spans (once each), current
-- requests and outcomes, as DuckDB's prune counts them.
WITH erased AS (
    SELECT DISTINCT request_id FROM (
        SELECT request_id FROM derivations WHERE has({trace_ids:Array(String)}, trace_id)
        UNION ALL
        SELECT request_id FROM requests_versions WHERE has({trace_ids:Array(String)}, trace_id)
        UNION ALL
        SELECT request_id FROM request_evidence_versions
        WHERE has({trace_ids:Array(String)}, assumeNotNull(trace_id))
        UNION ALL
        SELECT arrayJoin({hashed:Array(Int64)}) AS request_id
        WHERE request_id NOT IN (
            SELECT request_id FROM derivations WHERE NOT has({trace_ids:Array(String)}, trace_id)
            UNION ALL
            SELECT request_id FROM requests_versions
            WHERE NOT has({trace_ids:Array(String)}, trace_id))))
SELECT
    (SELECT groupUniqArray(request_id) FROM erased) AS request_ids,
    (SELECT groupUniqArray(assumeNotNull(text_hash)) FROM chunks_versions
     WHERE request_id IN erased AND text_hash IS NOT NULL) AS chunk_text_hashes,
    (SELECT groupUniqArray(h) FROM (
        SELECT arrayJoin(text_refs) AS h FROM spans
        WHERE has({trace_ids:Array(String)}, trace_id))) AS text_hashes,
    (SELECT groupUniqArray(trace_id) FROM (
        SELECT trace_id FROM spans WHERE has({trace_ids:Array(String)}, trace_id)
        UNION ALL
        SELECT trace_id FROM requests_versions WHERE has({trace_ids:Array(String)}, trace_id)
        UNION ALL
        SELECT trace_id FROM derivations WHERE has({trace_ids:Array(String)}, trace_id)
        UNION ALL
        SELECT trace_id FROM outcomes WHERE has({trace_ids:Array(String)}, trace_id)))
        AS stored_traces,
    (SELECT count() FROM (
        SELECT DISTINCT trace_id, span_id FROM spans
        WHERE has({trace_ids:Array(String)}, trace_id))) AS spans,
    (SELECT count() FROM requests WHERE has({trace_ids:Array(String)}, trace_id)) AS requests,
    (SELECT count() FROM outcomes WHERE has({trace_ids:Array(String)}, trace_id)) AS outcomes;
