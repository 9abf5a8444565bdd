-- engine: clickhouse
-- A copy table whose view's columns changed (queries/create_evidence_scopes.sql); `name` is
-- one of the fixed names the caller holds, never input.
DROP TABLE IF EXISTS scoped_{{ name }};
