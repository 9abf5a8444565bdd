{% from "parts/filters.sql" import param with context -%}
-- What of one request's answer each chunk it follows holds (answer_sources), in answer order:
-- offsets in the answer and in the chunk's text, and the matched text when texts are kept.
SELECT chunk_id, ordinal, kind, answer_start, answer_end, chunk_start, chunk_end, matched,
       matched_hash
FROM answer_sources
WHERE request_id = {{ param("r", "Int64") }}
ORDER BY answer_start, ordinal, chunk_start;
