{#- Which requests a rendering of request_evidence_live covers (schemas/sql/sqlfiles.py, `scope`):

      all            every request: the stored view
      request_range  request ids in [$lo, $hi] (the store's rebuild, in ranges)
      traces         the requests $request_ids of the traces $trace_ids (the store's refresh
                     after a write); on ClickHouse read from the copies of their rows
                     under {scope:UUID} (queries/create_evidence_scopes.sql)

    Import `with context`: the macros read `scope` (and `engine`: parameters are $name for
    DuckDB, {name:Type} for ClickHouse). -#}

{#- A condition on `alias`, a relation with a request_id column. -#}
{%- macro request_in_scope(alias) -%}
{%- if scope == "all" -%}
TRUE
{%- elif scope == "request_range" and engine == "clickhouse" -%}
{{ alias }}.request_id BETWEEN {lo:Int64} AND {hi:Int64}
{%- elif scope == "request_range" -%}
{{ alias }}.request_id BETWEEN $lo AND $hi
{%- elif scope == "traces" and engine == "clickhouse" -%}
has({request_ids:Array(Int64)}, {{ alias }}.request_id)
{%- elif scope == "traces" -%}
{{ alias }}.request_id IN (SELECT unnest($request_ids))
{%- else -%}
{{ fail("unknown scope " ~ scope) }}
{%- endif -%}
{%- endmacro -%}

{#- A condition on `alias`, a relation with a trace_id column. -#}
{%- macro trace_in_scope(alias) -%}
{%- if scope == "all" -%}
TRUE
{%- elif scope == "request_range" and engine == "clickhouse" -%}
{{ alias }}.trace_id IN (SELECT trace_id FROM requests WHERE request_id BETWEEN {lo:Int64} AND {hi:Int64})
{%- elif scope == "request_range" -%}
{{ alias }}.trace_id IN (SELECT trace_id FROM requests WHERE request_id BETWEEN $lo AND $hi)
{%- elif scope == "traces" and engine == "clickhouse" -%}
has({trace_ids:Array(String)}, {{ alias }}.trace_id)
{%- elif scope == "traces" -%}
{{ alias }}.trace_id IN (SELECT unnest($trace_ids))
{%- else -%}
{{ fail("unknown scope " ~ scope) }}
{%- endif -%}
{%- endmacro -%}


{#- The relation `name` (requests, chunks, placements, answer_sources, outcomes) is read from:
    itself, or on ClickHouse under scope "traces" its rows copied for this refresh. -#}
{%- macro scoped(name) -%}
{%- if scope == "traces" and engine == "clickhouse" -%}
(SELECT * EXCEPT (scope, scoped_at) FROM scoped_{{ name }} WHERE scope = {scope:UUID})
{%- else -%}
{{ name }}
{%- endif -%}
{%- endmacro -%}
