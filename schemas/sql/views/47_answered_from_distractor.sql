-- metric: Answered from a distractor: among wrong answers whose decisive evidence was in the prompt, the share whose answer follows a non-decisive chunk, by that chunk's band and slot ('any': a distractor anywhere), with Wilson 95% intervals.
-- keys: band, slot
-- The chunks an answer follows are found in derivation (answer_sources, docs/metrics.md
-- "Answer sources"); request_evidence.followed_distractors keeps the non-decisive ones in the
-- prompt at their first occurrence, banded here with the settings. A request following
-- distractors at two slots counts once at each, so the rows of a band sum to at least its
-- requests; `wrong` is every wrong answer with decisive evidence in the prompt, the same in
-- each row of a group.
{% from "parts/dialect.sql" import list_len, list_position, position_band, typed_null, unnest_fields with context -%}
CREATE OR REPLACE VIEW answered_from_distractor AS
WITH wrong AS (
    SELECT {{ groups }} request_id, follows_decisive, followed_distractors,
           count(*) OVER ({{ partition }}) AS wrong
    FROM {{ facts }} f
    WHERE correct = false AND n_decisive_in_prompt > 0
), followed AS (
    SELECT {{ groups }} wrong, request_id, follows_decisive,
           {{ unnest_fields("followed_distractors", ["chunk_id", "slot", "relative_position"]) }}
    FROM wrong
    WHERE {{ list_len("followed_distractors") }} > 0
), placed AS (
    SELECT {{ groups }} wrong, {{ position_band("relative_position") }} AS band, slot,
           request_id AS following, follows_decisive
    FROM followed
    UNION ALL
    SELECT {{ groups }} wrong, 'any' AS band, {{ typed_null("INTEGER") }} AS slot,
           CASE WHEN {{ list_len("followed_distractors") }} > 0 THEN request_id END AS following,
           follows_decisive
    FROM wrong
)
SELECT {{ groups }}
    band,
    slot,
    any_value(wrong) AS wrong,
    count(DISTINCT following) AS requests,
    count(DISTINCT following) / any_value(wrong) AS share,
    wilson_low(count(DISTINCT following), any_value(wrong)) AS ci_low,
    wilson_high(count(DISTINCT following), any_value(wrong)) AS ci_high,
    count(DISTINCT following) FILTER (WHERE NOT follows_decisive) AS instead_of_decisive
FROM placed
GROUP BY {{ groups }} band, slot
ORDER BY {{ groups }} {{ list_position("['any', 'early', 'middle', 'late']", "band") }}, slot;
