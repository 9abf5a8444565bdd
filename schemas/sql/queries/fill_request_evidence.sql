-- The request_evidence rows of the requests in `scope` (parts/scope.sql), computed by the
-- view request_evidence_live's own query limited to them. A rebuild by ranges inserts in
-- request order.
INSERT INTO request_evidence
SELECT * FROM {{ relation("request_evidence_live") }}
{%- if scope == "request_range" %}
ORDER BY request_id
{%- endif %};
