{% from "parts/filters.sql" import param with context -%}
-- The placements of one request in prompt order, with slot, relative position and band.
SELECT chunk_id, prompt_index, slot, k, token_start, token_end, char_start, char_end,
       relative_position, band
FROM placement_positions
WHERE request_id = {{ param("r", "Int64") }}
ORDER BY prompt_index;
