{#- Where DuckDB and ClickHouse spell the same thing differently (docs/architecture.md, "Two
    engines"). A view calls these macros with SQL expressions as strings and reads the same for
    both engines; each renders DuckDB's SQL exactly as the view wrote it before, and
    ClickHouse's equivalent under engine "clickhouse". Import `with context`: they read
    `engine`. What both engines accept alike (FILTER clauses, IS DISTINCT FROM, GROUP BY ALL,
    USING joins, named windows) is written plainly in the views.

    ClickHouse is run with the session settings of queries/clickhouse_settings.sql
    (join_use_nulls, cast_keep_nullable, aggregate_functions_null_for_empty and others), so an
    outer join, a CAST and an aggregate over no rows give NULL as in DuckDB. ClickHouse has no NULL
    array: a list column unset in DuckDB is empty there (and an outcome's lists carry a flag,
    list_is_set). -#}

{#- The value at the greatest `key` among the rows where `condition` holds. -#}
{%- macro arg_max_if(value, key, condition) -%}
{%- if engine == "clickhouse" -%}
argMaxIf({{ value }}, {{ key }}, {{ condition }})
{%- else -%}
arg_max({{ value }}, {{ key }}) FILTER (WHERE {{ condition }})
{%- endif -%}
{%- endmacro -%}

{#- The list column `list` is set: not NULL (DuckDB); its column <list>_set (ClickHouse, whose
    arrays are never NULL: migrations/001_core.sql). -#}
{%- macro list_is_set(list) -%}
{%- if engine == "clickhouse" -%}
{{ list }}_set
{%- else -%}
{{ list }} IS NOT NULL
{%- endif -%}
{%- endmacro -%}

{%- macro list_len(list) -%}
{%- if engine == "clickhouse" -%}
length({{ list }})
{%- else -%}
len({{ list }})
{%- endif -%}
{%- endmacro -%}

{#- The 1-based position of `value` in the literal `list`; NULL when it is not there. -#}
{%- macro list_position(list, value) -%}
{%- if engine == "clickhouse" -%}
nullif(indexOf({{ list }}, {{ value }}), 0)
{%- else -%}
list_position({{ list }}, {{ value }})
{%- endif -%}
{%- endmacro -%}

{#- The distinct non-NULL values of `value` in the group, in ascending order. -#}
{%- macro sorted_distinct(value) -%}
{%- if engine == "clickhouse" -%}
arraySort(groupUniqArray({{ value }}))
{%- else -%}
list_sort(list_distinct(list({{ value }})))
{%- endif -%}
{%- endmacro -%}

{%- macro bool_or(value) -%}
{%- if engine == "clickhouse" -%}
max({{ value }})
{%- else -%}
bool_or({{ value }})
{%- endif -%}
{%- endmacro -%}

{%- macro bool_and(value) -%}
{%- if engine == "clickhouse" -%}
min({{ value }})
{%- else -%}
bool_and({{ value }})
{%- endif -%}
{%- endmacro -%}

{#- The first `value` in the order `order` (DuckDB ORDER BY items; a DESC item must be
    numeric) among the rows where `condition` holds. -#}
{%- macro first_by(value, order, condition) -%}
{%- if engine == "clickhouse" -%}
argMinIf({{ value }}, (
{%- for item in order -%}
{{ ", " if not loop.first }}
{%- if item.endswith(" DESC") %}-({{ item[:-5] }}){% else %}{{ item.removesuffix(" ASC") }}{% endif -%}
{%- endfor -%}
), {{ condition }})
{%- else -%}
first({{ value }} ORDER BY {{ order | join(", ") }}) FILTER (WHERE {{ condition }})
{%- endif -%}
{%- endmacro -%}

{#- The most frequent non-NULL `value`; a tie goes to the first in `order`, an expression of
    `value` (ClickHouse: to the lowest value when no order is given). -#}
{%- macro mode(value, order=none) -%}
{%- if engine == "clickhouse" -%}
if(count({{ value }}) = 0, NULL,
       arraySort(t -> (-t.2, t.3), arrayMap(v -> (v, countEqual(groupArray({{ value }}), v),
           {{ (order | replace(value, "v")) if order else "v" }}), arrayDistinct(groupArray({{ value }}))))[1].1)
{%- elif order -%}
mode({{ value }} ORDER BY {{ order }})
{%- else -%}
mode({{ value }})
{%- endif -%}
{%- endmacro -%}

{#- `relation.*` but the columns `columns` (a comma-separated list). -#}
{%- macro star_except(relation, columns) -%}
{{ relation }} {{ "EXCEPT" if engine == "clickhouse" else "EXCLUDE" }} ({{ columns }})
{%- endmacro -%}

{#- One row per element of `list`, a list of structs, its fields `fields` as columns. -#}
{%- macro unnest_fields(list, fields) -%}
{%- if engine == "clickhouse" -%}
{%- for field in fields -%}
{{ ", " if not loop.first }}tupleElement({% if loop.first %}arrayJoin({{ list }}) AS unnested{% else %}unnested{% endif %}, '{{ field }}') AS {{ field }}
{%- endfor -%}
{%- else -%}
unnest({{ list }}, recursive := true)
{%- endif -%}
{%- endmacro -%}

{#- One row per element of `list`, one NULL row when it is unset. -#}
{%- macro unnest_or_null(list) -%}
{%- if engine == "clickhouse" -%}
arrayJoin(if(empty({{ list }}), [NULL], {{ list }}))
{%- else -%}
unnest(coalesce({{ list }}, [NULL]))
{%- endif -%}
{%- endmacro -%}

{#- A NULL of the DuckDB type `type`. -#}
{%- macro typed_null(type) -%}
{%- if engine == "clickhouse" -%}
CAST(NULL AS Nullable({{ {"INTEGER": "Int32", "BIGINT": "Int64", "DOUBLE": "Float64", "VARCHAR": "String"}[type] }}))
{%- else -%}
CAST(NULL AS {{ type }})
{%- endif -%}
{%- endmacro -%}

{#- The value `value` had in the row before, in window `window`; NULL in the first row. -#}
{%- macro lag(value, window) -%}
{%- if engine == "clickhouse" -%}
lagInFrame(toNullable({{ value }})) OVER {{ window }}
{%- else -%}
lag({{ value }}) OVER {{ window }}
{%- endif -%}
{%- endmacro -%}

{#- The band of a relative position (views/01_helpers.sql): a DuckDB macro; inline for
    ClickHouse, whose SQL functions cannot read the settings. -#}
{%- macro position_band(relative_position) -%}
{%- if engine == "clickhouse" -%}
CASE
        WHEN ({{ relative_position }}) IS NULL THEN NULL
        WHEN ({{ relative_position }}) < (SELECT early_end FROM metric_settings) THEN 'early'
        WHEN ({{ relative_position }}) < (SELECT late_start FROM metric_settings) THEN 'middle'
        ELSE 'late'
    END
{%- else -%}
position_band({{ relative_position }})
{%- endif -%}
{%- endmacro -%}

{#- One row per element of `list`. -#}
{%- macro unnest(list) -%}
{%- if engine == "clickhouse" -%}
arrayJoin({{ list }})
{%- else -%}
unnest({{ list }})
{%- endif -%}
{%- endmacro -%}

{%- macro list_contains(list, value) -%}
{%- if engine == "clickhouse" -%}
has({{ list }}, {{ value }})
{%- else -%}
list_contains({{ list }}, {{ value }})
{%- endif -%}
{%- endmacro -%}

{%- macro list_distinct(list) -%}
{%- if engine == "clickhouse" -%}
arrayDistinct({{ list }})
{%- else -%}
list_distinct({{ list }})
{%- endif -%}
{%- endmacro -%}

{#- The `value` at the least `key`. -#}
{%- macro arg_min(value, key) -%}
{%- if engine == "clickhouse" -%}
argMin({{ value }}, {{ key }})
{%- else -%}
arg_min({{ value }}, {{ key }})
{%- endif -%}
{%- endmacro -%}

{#- The rows of the left side with a match on the right, each once. -#}
{%- macro semi_join() -%}
{{ "LEFT SEMI JOIN" if engine == "clickhouse" else "SEMI JOIN" }}
{%- endmacro -%}

{#- The Monday (a DATE) of the ISO week of the time `time`, in UTC. -#}
{%- macro iso_week(time) -%}
{%- if engine == "clickhouse" -%}
toMonday({{ time }}, 'UTC')
{%- else -%}
CAST(date_trunc('week', timezone('UTC', {{ time }})) AS DATE)
{%- endif -%}
{%- endmacro -%}

{#- A qualified column `column` (alias.name) under its own name: ClickHouse calls it by the
    qualified name when another joined relation has a column of the same name. -#}
{%- macro bare(column) -%}
{{ column }}{% if engine == "clickhouse" %} AS {{ column.split(".")[-1] }}{% endif %}
{%- endmacro -%}

{#- The text table `table` (chunk_texts, texts) as a join's right side, for the hashes
    `hashes` (a subquery) only. ClickHouse: writers sharing a store may each insert the same
    text before a merge folds them, so each hash is read once; DuckDB: the table itself. -#}
{%- macro texts_of(table, hashes) -%}
{%- if engine == "clickhouse" -%}
(SELECT text_hash, any(text) AS text FROM {{ table }} WHERE text_hash IN ({{ hashes }}) GROUP BY text_hash)
{%- else -%}
{{ table }}
{%- endif -%}
{%- endmacro -%}
