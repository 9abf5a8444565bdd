{#- What a metric view's placeholders become (schemas/sql/sqlfiles.py, metric_inputs). With no
    filters and no group keys: the stored view. Group keys come only from the allowlist in
    collector/query/reads.py (GROUP_KEYS); filter values are bound parameters (parts/filters.sql). -#}
{%- from "parts/filters.sql" import conditions -%}

{%- macro facts(filters) -%}
{%- if filters -%}
(SELECT * FROM request_facts WHERE {{ conditions(filters) }})
{%- else -%}
request_facts
{%- endif -%}
{%- endmacro -%}

{%- macro groups(keys) -%}
{%- for key in keys %}{{ key }}, {% endfor -%}
{%- endmacro -%}

{%- macro partition(keys) -%}
{%- if keys %}PARTITION BY {{ keys | join(", ") }}{% endif -%}
{%- endmacro -%}
