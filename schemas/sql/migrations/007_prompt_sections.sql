-- What fills the prompt around the chunks, for the inspector's prompt strip: the
-- instructions, earlier turns, the question and the answer format, as token ranges in prompt
-- order (collector/normalize/sections.py; docs/zero-code.md, "Prompt sections"). Requests
-- stored before this migration have none until `midtrace rebuild`.
{% if engine == "clickhouse" -%}
ALTER TABLE requests_versions ADD COLUMN prompt_sections
    Array(Tuple(kind Nullable(String), token_start Nullable(Int32), token_end Nullable(Int32)));
{%- else -%}
ALTER TABLE requests ADD COLUMN prompt_sections STRUCT(kind VARCHAR, token_start INTEGER, token_end INTEGER)[];
{%- endif %}
