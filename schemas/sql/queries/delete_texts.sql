-- engine: clickhouse
-- Erase the texts {texts} and chunk texts {chunk_texts} (queries/erase_texts.sql): a mutation
-- that rewrites the parts holding them, submitted (the caller waits for it). `tables`: those of
-- the two with hashes to delete.
{% for table in tables -%}
ALTER TABLE {{ table }} DELETE WHERE has({ {{- table }}:Array(String)}, text_hash)
SETTINGS mutations_sync = 0;
{% endfor -%}
