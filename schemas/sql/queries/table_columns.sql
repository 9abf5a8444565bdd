-- Every column of every table of the open database, to compare its layout with the one its
-- recorded migrations make (collector/storage/layout.py).
SELECT table_name, column_name, data_type
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main'
  AND table_name IN (SELECT table_name FROM duckdb_tables()
                     WHERE database_name = current_database() AND schema_name = 'main');
