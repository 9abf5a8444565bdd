{#- ClickHouse's versioned rows (migrations/001_core.sql, queries/create_request_evidence.sql). -#}

{#- trace_id, request_id and the version a request_evidence row computed now gets, for the
    requests of the newest derivations of the traces that satisfy `condition` (on trace_id):
    the derivation's version in the high 64 bits, the number of the trace's outcomes in the
    low 32. -#}
{%- macro evidence_versions(condition) -%}
SELECT d.trace_id AS trace_id, d.request_id AS request_id,
       bitOr(bitShiftLeft(toUInt128(d.version), 32), toUInt128(coalesce(o.n, 0))) AS version
FROM (SELECT trace_id, request_id, version FROM current_derivations
      WHERE has_request AND {{ condition }}) d
LEFT JOIN (SELECT trace_id, count() AS n FROM outcomes WHERE {{ condition }} GROUP BY trace_id) o
    ON o.trace_id = d.trace_id
{%- endmacro -%}
