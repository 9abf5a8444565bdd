-- citation_positions as it was defined before request_evidence kept the cited chunks'
-- positions: it finds the cited chunks by scanning every chunk and bands their placements
-- through placement_positions. tests/test_citation_positions.py checks that the view, which
-- reads request_evidence.cited_positions, gives the same rows.
WITH f AS (
    SELECT * FROM {{ facts }} f
    WHERE n_decisive_in_prompt > 0
), cited_chunks AS (
    SELECT c.request_id, c.chunk_id
    FROM chunks c
    JOIN requests r USING (request_id)
    WHERE coalesce(c.cited, false) OR coalesce(list_contains(r.cited_ids, c.chunk_id), false)
), cited_bands AS (
    SELECT DISTINCT pp.request_id, pp.band AS cited_band
    FROM placement_positions pp
    SEMI JOIN cited_chunks cc ON cc.request_id = pp.request_id AND cc.chunk_id = pp.chunk_id
)
SELECT * FROM (
    SELECT {{ groups }}
        decisive_band,
        coalesce(cited_band, 'none') AS cited_band,
        count(*) AS requests
    FROM f
    LEFT JOIN cited_bands USING (request_id)
    GROUP BY ALL
)
ORDER BY {{ groups }} list_position(['early', 'middle', 'late'], decisive_band),
         list_position(['early', 'middle', 'late', 'none'], cited_band)
