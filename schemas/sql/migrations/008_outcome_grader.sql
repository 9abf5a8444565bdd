-- Who graded (docs/grading.md, "Precedence"): 'person' (the dashboard, or anyone posting to
-- /v1/outcomes), 'references' (`midtrace grade --references`, a best-subspan match against
-- accepted answers) or 'judge' (an LLM judge). NULL means person: every outcome stored
-- before this column existed, span-attribute outcomes and posts that name no grader were
-- sent by the app or a person. The request_outcomes view ranks person over references over
-- judge, whatever their times.
{% if engine == "clickhouse" -%}
ALTER TABLE outcomes_versions ADD COLUMN grader Nullable(String);
{%- else -%}
ALTER TABLE outcomes ADD COLUMN grader VARCHAR;
{%- endif %}
