-- engine: clickhouse
-- Erase the rows of the traces {trace_ids} (their requests {request_ids}) from each table of
-- parts/erase.sql, in its order: in each table, a mutation that rewrites the parts of the
-- `partitions` holding such rows (queries/erase_partitions.sql) without them (a lightweight
-- DELETE would only mask the rows until a merge). The spans' is waited for before the others
-- are submitted, which then run at once; the caller waits for them all. `partitions`: table ->
-- partition ids, checked by the caller (a partition is named by a literal, not a parameter).
{% from "parts/erase.sql" import erased_rows -%}
{% for table, where in erased_rows if partitions.get(table) -%}
ALTER TABLE {{ table }}
{% for partition in partitions[table] -%}
    DELETE IN PARTITION ID '{{ partition }}' WHERE {{ where }}{{ "," if not loop.last }}
{% endfor -%}
SETTINGS mutations_sync = {{ 2 if table == "spans" else 0 }};
{% endfor -%}
