-- metric: Failure taxonomy by ISO week (labelled by its Monday, UTC): are failures trending toward retrieval misses or layout misses?
-- keys: week, class
{% from "parts/dialect.sql" import list_position with context -%}
CREATE OR REPLACE VIEW taxonomy_by_week AS
SELECT {{ groups }}
    week,
    taxonomy_class AS class,
    count(*) AS n,
    count(*) / sum(count(*)) OVER (PARTITION BY {{ groups }} week) AS share
FROM {{ facts }} f
GROUP BY {{ groups }} week, taxonomy_class
ORDER BY {{ groups }} week, {{ list_position("['answered', 'unused', 'buried', 'dropped', 'missing', 'unlabeled', 'ungraded']", "class") }};
