{#- A metric view without key columns of its own, split by group keys: one row per group, in
    group order (collector/query/reads.py, view_query). `query` is the view's rendered query. -#}
SELECT * FROM ({{ query }}) ORDER BY {{ group_keys | join(", ") }}
