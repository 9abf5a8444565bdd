-- engine: clickhouse
-- The current rows of the requests $request_ids (of the traces $trace_ids) copied under
-- {scope:UUID}, for the refresh of their request_evidence rows that follows
-- (queries/create_evidence_scopes.sql, fill_request_evidence.sql under scope "traces").
{% for name in scoped_tables -%}
{% if name == "outcomes" -%}
INSERT INTO scoped_outcomes SELECT {scope:UUID}, now(), * FROM outcomes
WHERE has({trace_ids:Array(String)}, trace_id);
{% else -%}
INSERT INTO scoped_{{ name }} SELECT {scope:UUID}, now(), * FROM {{ name }}
WHERE has({request_ids:Array(Int64)}, request_id);
{% endif -%}
{% endfor -%}
