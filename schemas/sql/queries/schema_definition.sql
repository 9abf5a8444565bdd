-- engine: clickhouse
-- The definition the store's tables and views were last brought up to (clickhouse.create_schema
-- records it last; empty on a store from before it was recorded). Read once derived_state exists.
SELECT argMax(definition_hash, built_at) FROM derived_state WHERE name = 'schema';
