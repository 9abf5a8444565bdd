{#- The accuracy columns of a grouped metric view: requests (every request in the group),
    n (graded), correct, accuracy (NULL when none is graded) and its Wilson 95% interval. -#}
{%- macro accuracy_columns() -%}
count(*) AS requests,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high
{%- endmacro -%}
