-- The first 64 bits of every stored trace id (collector/known.py).
SELECT DISTINCT CAST('0x' || left(trace_id, 16) AS UBIGINT) AS k FROM spans;
