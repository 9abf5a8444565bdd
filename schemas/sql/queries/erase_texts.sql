-- engine: clickhouse
-- The texts and chunk texts of traces being erased that nothing else refers to: a span or a
-- chunk (of any version) of another trace. Texts are shared by hash between traces.
-- {text_hashes} and {chunk_text_hashes}: those the erased traces' spans and chunks refer to;
-- {trace_ids} and {request_ids}: the erased traces and their requests, whose rows do not count
-- (they may still be there: the texts go first, so an erase stopped part way and run again
-- still finds them).
SELECT
    arrayFilter(h -> h NOT IN (
        SELECT arrayJoin(text_refs) FROM spans
        WHERE NOT has({trace_ids:Array(String)}, trace_id)
          AND hasAny(text_refs, {text_hashes:Array(String)})),
        {text_hashes:Array(String)}) AS texts,
    arrayFilter(h -> h NOT IN (
        SELECT assumeNotNull(text_hash) FROM chunks_versions
        WHERE NOT has({request_ids:Array(Int64)}, request_id)
          AND has({chunk_text_hashes:Array(String)}, assumeNotNull(text_hash))),
        {chunk_text_hashes:Array(String)}) AS chunk_texts;
