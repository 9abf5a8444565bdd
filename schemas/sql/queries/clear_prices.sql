-- engine: clickhouse
-- The price table the store is opened with replaces the one it had (store.py's
-- replace_prices does this on DuckDB); the writer then inserts the file's rows.
TRUNCATE TABLE prices;
