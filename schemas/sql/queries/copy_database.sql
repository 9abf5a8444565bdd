-- Every table, view and macro of the open database (`database`, an identifier) copied into a
-- fresh file ($path) that then replaces it: deleted rows leave no bytes behind there
-- (collector/storage/retention.py, compact). The copy owes no compaction, and is checkpointed
-- so that it is whole without a .wal beside it.
ATTACH $path AS compacted;
COPY FROM DATABASE {{ database | identifier }} TO compacted;
DELETE FROM compacted.pending_work WHERE name = 'compact';
CHECKPOINT compacted;
DETACH compacted;
