{#- Where the rows of the traces being erased are on ClickHouse (collector/storage/
    clickhouse_erase.py): each table holding rows of a trace, in the order they are deleted,
    with what picks them out of {trace_ids} and their {request_ids}. The spans are gone before
    the derived rows are deleted: a trace with derived rows and no spans is never derived
    again (queries/underived_traces.sql), while derived rows gone first would leave spans for
    `recover` to derive back. The scoped_* tables hold copies a refresh of request_evidence
    made within the hour (queries/create_evidence_scopes.sql). A migration that adds a table
    with rows of a trace adds it here
    (tests/test_clickhouse_erase.py checks every table with a trace_id or request_id column). -#}
{%- set erased_rows = [
    ("spans", "has({trace_ids:Array(String)}, trace_id)"),
    ("outcomes_versions", "has({trace_ids:Array(String)}, trace_id)"),
    ("request_evidence_versions", "has({request_ids:Array(Int64)}, request_id) OR has({trace_ids:Array(String)}, assumeNotNull(trace_id))"),
    ("chunks_versions", "has({request_ids:Array(Int64)}, request_id)"),
    ("placements_versions", "has({request_ids:Array(Int64)}, request_id)"),
    ("answer_sources_versions", "has({request_ids:Array(Int64)}, request_id)"),
    ("requests_versions", "has({request_ids:Array(Int64)}, request_id) OR has({trace_ids:Array(String)}, trace_id)"),
    ("derivations", "has({request_ids:Array(Int64)}, request_id) OR has({trace_ids:Array(String)}, trace_id)"),
    ("scoped_requests", "has({request_ids:Array(Int64)}, request_id) OR has({trace_ids:Array(String)}, trace_id)"),
    ("scoped_chunks", "has({request_ids:Array(Int64)}, request_id)"),
    ("scoped_placements", "has({request_ids:Array(Int64)}, request_id)"),
    ("scoped_answer_sources", "has({request_ids:Array(Int64)}, request_id)"),
    ("scoped_outcomes", "has({trace_ids:Array(String)}, trace_id)"),
] -%}
