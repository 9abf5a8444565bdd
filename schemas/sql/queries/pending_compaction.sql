-- Since when the file owes a compaction; no row when it owes none.
SELECT since FROM pending_work WHERE name = 'compact';
