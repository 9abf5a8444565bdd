-- Every occurrence of a chunk in a final prompt, with its slot and position band.
-- slot: 1-based among the k placements of the request, in prompt order.
-- relative_position: token midpoint / prompt tokens (max(token_end) when the request has no
-- prompt token count), capped at 1; (slot - 0.5) / k when the placement has no token offsets.
-- band: [0, band_early_end) early, [band_early_end, band_late_start) middle, the rest late.
{% from "parts/dialect.sql" import position_band with context -%}
CREATE OR REPLACE VIEW placement_positions AS
WITH placed AS (
    SELECT
        p.request_id,
        p.chunk_id,
        p.prompt_index,
        row_number() OVER (PARTITION BY p.request_id ORDER BY p.prompt_index) AS slot,
        count(*) OVER (PARTITION BY p.request_id) AS k,
        p.token_start,
        p.token_end,
        p.char_start,
        p.char_end,
        coalesce(nullif(r.prompt_tokens, 0),
                 nullif(max(p.token_end) OVER (PARTITION BY p.request_id), 0)) AS prompt_tokens
    FROM placements p
    JOIN requests r USING (request_id)
), positioned AS (
    SELECT *, relative_position(token_start, token_end, prompt_tokens, slot, k) AS relative_position
    FROM placed
)
SELECT
    request_id, chunk_id, prompt_index, slot, k, token_start, token_end, char_start, char_end,
    relative_position, {{ position_band("relative_position") }} AS band
FROM positioned;
