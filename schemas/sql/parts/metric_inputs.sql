{#- What a metric view's placeholders become (schemas/sql/sqlfiles.py, metric_inputs). With no
    filters and no group keys: the stored view. Group keys come only from the allowlist in
    collector/query/reads.py (GROUP_KEYS); filter values are bound parameters (parts/filters.sql);
    the grader, one of a fixed list, picks whose grades count (parts/graders.sql). -#}
{%- from "parts/filters.sql" import conditions with context -%}
{%- from "parts/graders.sql" import graded_facts -%}

{#- `grader`: whose grades count (parts/graders.sql); None or "all" for the merged outcome.
    `every_kind`: requests of every kind, not only `rag` ones (the requests list). -#}
{%- macro facts(filters, grader=None, every_kind=False) -%}
{%- if filters -%}
(SELECT * FROM {{ graded_facts(grader, every_kind) }} WHERE {{ conditions(filters) }})
{%- else -%}
{{ graded_facts(grader, every_kind) }}
{%- endif -%}
{%- endmacro -%}

{%- macro groups(keys) -%}
{%- for key in keys %}{{ key }}, {% endfor -%}
{%- endmacro -%}

{%- macro partition(keys) -%}
{%- if keys %}PARTITION BY {{ keys | join(", ") }}{% endif -%}
{%- endmacro -%}
