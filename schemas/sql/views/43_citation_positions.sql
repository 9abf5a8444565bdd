-- metric: Where cited chunks sat versus where the decisive chunk sat: among requests whose decisive evidence was in the prompt, requests by the band of their decisive chunk and the band of each in-prompt chunk the answer cited ('none': it cited nothing in the prompt).
-- keys: decisive_band, cited_band
-- A request citing chunks in two bands counts once in each; `requests` per decisive band
-- therefore sums to at least the requests in that band.
-- The cited chunks' positions are kept per request (request_evidence.cited_positions, the
-- relative positions of their occurrences in the prompt) and banded here with the settings,
-- as placement_positions bands them: reading them, not the chunks, is what keeps this view
-- as fast as the others.
{% from "parts/dialect.sql" import list_position, position_band, unnest_or_null with context -%}
CREATE OR REPLACE VIEW citation_positions AS
WITH cited AS (
    SELECT {{ groups }} request_id, decisive_band,
           {{ unnest_or_null("cited_positions") }} AS cited_position
    FROM {{ facts }} f
    WHERE n_decisive_in_prompt > 0
), banded AS (
    SELECT DISTINCT {{ groups }} request_id, decisive_band,
           coalesce({{ position_band("cited_position") }}, 'none') AS cited_band
    FROM cited
)
SELECT * FROM (
    SELECT {{ groups }} decisive_band, cited_band, count(*) AS requests
    FROM banded
    GROUP BY ALL
)
ORDER BY {{ groups }} {{ list_position("['early', 'middle', 'late']", "decisive_band") }},
         {{ list_position("['early', 'middle', 'late', 'none']", "cited_band") }};
