-- Every table, view and macro of the open database (`database`, an identifier) copied into a
-- fresh file ($path) that then replaces it: deleted rows leave no bytes behind there
-- (collector/storage/retention.py, compact).
ATTACH $path AS compacted;
COPY FROM DATABASE {{ database | identifier }} TO compacted;
DETACH compacted;
