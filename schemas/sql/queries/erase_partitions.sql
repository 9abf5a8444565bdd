-- engine: clickhouse
-- The partitions holding rows of the traces {trace_ids} (their requests {request_ids}), by
-- table (parts/erase.sql): an erase rewrites the parts of these partitions only (queries/
-- erase_traces.sql), not every part of the table.
{% from "parts/erase.sql" import erased_rows -%}
{% for table, where in erased_rows -%}
SELECT '{{ table }}' AS table, _partition_id AS partition FROM {{ table }}
WHERE {{ where }} GROUP BY partition
{% if not loop.last %}UNION ALL
{% endif -%}
{% endfor -%}
ORDER BY table, partition;
