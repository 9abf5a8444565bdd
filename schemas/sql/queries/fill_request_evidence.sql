-- The request_evidence rows of the requests in `scope` (parts/scope.sql), computed by the
-- view request_evidence_live's own query limited to them. A rebuild by ranges inserts in
-- request order.
{% if engine == "clickhouse" -%}
-- ClickHouse: appended with their version (queries/create_request_evidence.sql); under scope
-- "traces" the versions the store read before, $versions beside $request_ids, and the rows
-- read from their copies under {scope:UUID} (queries/copy_evidence_scope.sql).
{% from "parts/versions.sql" import evidence_versions -%}
INSERT INTO request_evidence_versions
SELECT e.*,
{%- if scope == "traces" %}
       arrayElement({versions:Array(UInt128)}, indexOf({request_ids:Array(Int64)}, e.request_id))
FROM {{ relation("request_evidence_live") }} e
{%- else %}
       coalesce(v.version, toUInt128(0))
FROM {{ relation("request_evidence_live") }} e
LEFT JOIN ({{ evidence_versions("TRUE") }}) v ON v.request_id = e.request_id
{%- endif %}
{%- if scope == "request_range" %}
ORDER BY e.request_id
{%- endif %};
{%- else -%}
INSERT INTO request_evidence
SELECT * FROM {{ relation("request_evidence_live") }}
{%- if scope == "request_range" %}
ORDER BY request_id
{%- endif %};
{%- endif %}
