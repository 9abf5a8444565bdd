{#- The week grid of a week-by-week metric view (weekly_overview, citation_drift): every ISO
    week from the first to the last in the facts, for every group, weeks without data as
    zero counts. `counts` pairs each count column's name with its aggregate over the facts.
    Gives the CTEs f, weeks, grid, per_week and filled (one row per group and week); the view
    goes on with `, rates AS (...)`. Import `with context`: the macros read `engine`. -#}
{%- from "parts/dialect.sql" import lag with context -%}
{%- macro week_grid(facts, groups, counts) -%}
f AS (
    SELECT * FROM {{ facts }} f
), weeks AS (
{%- if engine == "clickhouse" %}
    SELECT arrayJoin(arrayMap(i -> addDays(first_week, 7 * i),
                              range(toUInt64(dateDiff('day', first_week, last_week) / 7) + 1))) AS week
    FROM (SELECT min(week) AS first_week, max(week) AS last_week FROM f) WHERE first_week IS NOT NULL
{%- else %}
    SELECT CAST(unnest(generate_series(min(week), max(week), INTERVAL 7 DAY)) AS DATE) AS week FROM f
{%- endif %}
), grid AS (
    SELECT * FROM (SELECT DISTINCT {{ groups }} 1 AS one FROM f) CROSS JOIN weeks
), per_week AS (
    SELECT {{ groups }}
        week,
{%- for name, aggregate in counts %}
        {{ aggregate }} AS {{ name }}{{ "," if not loop.last }}
{%- endfor %}
    FROM f
    GROUP BY ALL
), filled AS (
    SELECT {{ groups }}
        week,
{%- for name, _ in counts %}
        coalesce({{ name }}, 0) AS {{ name }}{{ "," if not loop.last }}
{%- endfor %}
    FROM grid
    LEFT JOIN per_week USING ({{ groups }} week)
)
{%- endmacro -%}

{#- `<rate>_change`: the rate's change from the week before, called out (non-NULL) only when
    both weeks have at least min_n (settings) in its denominator `n`. Reads the window `w`
    (the group's weeks in order) and `s`, the metric_settings row. -#}
{%- macro called_change(rate, n) -%}
CASE WHEN {{ n }} >= s.min_n AND {{ lag(n, "w") }} >= s.min_n
        THEN {{ rate }} - {{ lag(rate, "w") }} END AS {{ rate }}_change
{%- endmacro -%}
