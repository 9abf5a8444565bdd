-- Rows were deleted: the file owes a compaction from $since on (kept if one was owed already).
INSERT INTO pending_work VALUES ('compact', $since) ON CONFLICT DO NOTHING;
