-- What each trace is (docs/metrics.md, "Request kinds"): `rag` (retrieval and the LLM call that
-- answered from it), `retrieval_only` (retrieval with no LLM call after it) or `llm_only` (an
-- LLM call with no retrieval). Only `rag` requests count in the metric views; the others are
-- listed with their kind. Requests stored before this migration were all counted: those with
-- the no-LLM-call warning become `retrieval_only` here; LLM-only traces, which were stored as
-- spans only, become requests with `midtrace rebuild`.
{% if engine == "clickhouse" -%}
-- (a ClickHouse store starts with this column: there are no older requests to mark)
ALTER TABLE requests_versions ADD COLUMN kind Nullable(String) DEFAULT 'rag';
{%- else -%}
ALTER TABLE requests ADD COLUMN kind VARCHAR DEFAULT 'rag';
UPDATE requests SET kind = 'retrieval_only'
WHERE list_contains(warnings, 'this trace has retrieval but no LLM call: it is kept with what was retrieved, with no answer, no prompt and no chunk dropped');
{%- endif %}
