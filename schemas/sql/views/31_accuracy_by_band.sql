-- metric: Accuracy of graded requests by the band (early, middle, late) of their decisive evidence, with Wilson 95% intervals; the closed-book condition 'absent' as a baseline row.
-- keys: band
-- requests counts every request with a decisive chunk in the prompt (graded or not): the
-- position distribution; n, correct and accuracy count graded requests only.
{% from "parts/accuracy.sql" import accuracy_columns %}
{% from "parts/dialect.sql" import list_position with context -%}
CREATE OR REPLACE VIEW accuracy_by_band AS
WITH banded AS (
    SELECT *, CASE WHEN condition = 'absent' THEN 'absent' ELSE decisive_band END AS band
    FROM {{ facts }} f
)
SELECT {{ groups }}
    band,
    {{ accuracy_columns() }}
FROM banded
WHERE band IS NOT NULL
GROUP BY {{ groups }} band
ORDER BY {{ groups }} {{ list_position("['absent', 'early', 'middle', 'late']", "band") }};
