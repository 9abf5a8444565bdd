-- engine: clickhouse
-- Erase the traces {trace_ids} (`midtrace prune --trace-id` on ClickHouse, collector/storage/
-- clickhouse_erase.py): every row of them in every table, each table a mutation that rewrites
-- the parts holding such rows without them (a lightweight DELETE only masks rows until a
-- merge), waited for. {request_ids}, {text_hashes} and {chunk_text_hashes} are what
-- queries/erase_targets.sql found before. The spans go first: a trace with derived rows and no
-- spans is never derived again (queries/underived_traces.sql), while derived rows gone first
-- would leave spans for `recover` to derive back. The texts go last, each only when no span or
-- chunk left refers to it (texts are shared by hash between traces). A table that a migration
-- adds with rows of a trace adds its delete here (tests/test_clickhouse_erase.py checks every
-- table with a trace_id or request_id column).
ALTER TABLE spans DELETE WHERE has({trace_ids:Array(String)}, trace_id)
SETTINGS mutations_sync = 2;
ALTER TABLE outcomes_versions DELETE WHERE has({trace_ids:Array(String)}, trace_id)
SETTINGS mutations_sync = 2;
ALTER TABLE request_evidence_versions DELETE
WHERE has({request_ids:Array(Int64)}, request_id)
   OR has({trace_ids:Array(String)}, assumeNotNull(trace_id))
SETTINGS mutations_sync = 2;
{% for table in ("chunks_versions", "placements_versions", "answer_sources_versions") -%}
ALTER TABLE {{ table }} DELETE WHERE has({request_ids:Array(Int64)}, request_id)
SETTINGS mutations_sync = 2;
{% endfor -%}
{% for table in ("requests_versions", "derivations") -%}
ALTER TABLE {{ table }} DELETE
WHERE has({request_ids:Array(Int64)}, request_id) OR has({trace_ids:Array(String)}, trace_id)
SETTINGS mutations_sync = 2;
{% endfor -%}
ALTER TABLE texts DELETE
WHERE has({text_hashes:Array(String)}, text_hash)
  AND text_hash NOT IN (SELECT arrayJoin(text_refs) FROM spans)
SETTINGS mutations_sync = 2;
ALTER TABLE chunk_texts DELETE
WHERE has({chunk_text_hashes:Array(String)}, text_hash)
  AND text_hash NOT IN (SELECT assumeNotNull(text_hash) FROM chunks_versions
                        WHERE text_hash IS NOT NULL)
SETTINGS mutations_sync = 2;
