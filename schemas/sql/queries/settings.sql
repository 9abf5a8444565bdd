-- The metric settings the views apply, with their help text (docs/metrics.md, "Settings").
SELECT key, value, help FROM settings ORDER BY key;
