-- engine: clickhouse
-- The definition a store's tables and views were just brought up to (clickhouse.create_schema):
-- a store opened again with the same one is left as it is.
INSERT INTO derived_state VALUES ('schema', {definition_hash:String}, {built_at:DateTime64(6, 'UTC')});
