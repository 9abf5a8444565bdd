{#- The conditions of the one set of filters (collector/query/reads.py, Filters), over the columns of
    request_facts. `filters` names the conditions that apply; each value is a bound parameter
    of the condition's name, never formatted in:

      since             time >= $since (UTC)          until     time < $until
      service, model, template, strategy, experiment, context_bucket
                        the column equals $<name>
      no_experiment     experiment IS NULL (traffic=production, the default; experiment=(none))
      any_experiment    experiment IS NOT NULL (traffic=experiment)
      question          the question or the answer text contains $question, case-insensitive
      class             taxonomy_class = $class

    A parameter is written $name for DuckDB, {name:Type} for ClickHouse (param below, `type`
    the ClickHouse type: a filter's own unless given); import `with context`: the macros read
    `engine`. -#}
{%- macro param(name, type=none) -%}
{%- if engine == "clickhouse" -%}
{ {{- name }}:{{ type or ("DateTime64(6, 'UTC')" if name in ("since", "until") else "String") -}} }
{%- else -%}
${{ name }}
{%- endif -%}
{%- endmacro -%}

{%- macro conditions(filters) -%}
{%- for name in filters -%}
{{ " AND " if not loop.first }}
{%- if name == "since" -%}
time >= {{ param("since") }}
{%- elif name == "until" -%}
time < {{ param("until") }}
{%- elif name in ("service", "model", "template", "strategy", "experiment", "context_bucket") -%}
{{ name }} = {{ param(name) }}
{%- elif name == "no_experiment" -%}
experiment IS NULL
{%- elif name == "any_experiment" -%}
experiment IS NOT NULL
{%- elif name == "question" -%}
{%- if engine == "clickhouse" -%}
request_id IN (SELECT request_id FROM requests WHERE positionCaseInsensitiveUTF8(question, {{ param("question") }}) > 0
                                                  OR positionCaseInsensitiveUTF8(answer, {{ param("question") }}) > 0)
{%- else -%}
request_id IN (SELECT request_id FROM requests WHERE contains(lower(question), lower($question))
                                                  OR contains(lower(answer), lower($question)))
{%- endif -%}
{%- elif name == "class" -%}
taxonomy_class = {{ param("class") }}
{%- else -%}
{{ fail("unknown filter condition " ~ name) }}
{%- endif -%}
{%- endfor -%}
{%- endmacro -%}

{%- macro where(filters) -%}
{%- if filters %} WHERE {{ conditions(filters) }}{% endif -%}
{%- endmacro -%}
