-- The price table the store is opened with (registered as _prices) replaces the one it had:
-- the views price requests by what the file was last opened with (docs/metrics.md, "Cost").
DELETE FROM prices;
INSERT INTO prices BY NAME SELECT * FROM _prices;
