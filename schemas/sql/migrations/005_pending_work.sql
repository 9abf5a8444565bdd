-- Work the store owes its file, one row per kind until it is done. 'compact': traces were
-- deleted and the file has not been rewritten since, so their bytes may still sit in its free
-- blocks; the next prune that compacts rewrites the file even when it deletes nothing, which
-- finishes a compaction that was cut short or skipped (collector/storage/retention.py).
{% if engine == "clickhouse" -%}
CREATE TABLE pending_work (
    name  String,
    since DateTime64(6, 'UTC')
) ENGINE = MergeTree ORDER BY name;
{%- else -%}
CREATE TABLE pending_work (
    name  VARCHAR PRIMARY KEY,
    since TIMESTAMPTZ NOT NULL
);
{%- endif %}
