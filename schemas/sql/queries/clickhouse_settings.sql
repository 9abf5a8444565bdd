-- What makes ClickHouse answer as DuckDB does (docs/architecture.md, "Two engines"), set on
-- each ClickHouse session before the views are created or read:
-- a name is the input's column before it is an alias of the same SELECT
-- (`argMax(correct, ...) AS correct` beside `argMaxIf(correct, ...)` would otherwise nest one
-- aggregate in the other);
SET prefer_column_name_to_alias = 1;
-- a joined subquery needs no alias;
SET joined_subquery_requires_alias = 0;
-- an outer join fills the columns of a missing row with NULL, not the type's default;
SET join_use_nulls = 1;
-- a CAST keeps a NULL;
SET cast_keep_nullable = 1;
-- an aggregate over no rows (sum, max, argMax ...) is NULL, not 0.
SET aggregate_functions_null_for_empty = 1;
