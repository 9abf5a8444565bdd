-- metric: Sources cited beside the decisive evidence: among requests whose decisive evidence was in the prompt, the non-decisive sources their answers cited, most cited first (instead_of_decisive: requests that cited no decisive chunk at all).
-- keys: source_id, authority
{% from "parts/dialect.sql" import list_len, unnest_fields with context -%}
CREATE OR REPLACE VIEW cited_sources_elsewhere AS
WITH cited AS (
    SELECT {{ groups }} request_id, cites_decisive, {{ unnest_fields("cited_other_sources", ["source_id", "authority"]) }}
    FROM {{ facts }} f
    WHERE n_decisive_in_prompt > 0 AND {{ list_len("cited_other_sources") }} > 0
)
SELECT {{ groups }}
    source_id,
    authority,
    count(*) AS requests,  -- cited_other_sources lists each source of a request once
    count(*) FILTER (WHERE NOT cites_decisive) AS instead_of_decisive
FROM cited
GROUP BY {{ groups }} source_id, authority
ORDER BY {{ groups }} requests DESC, source_id, authority;
