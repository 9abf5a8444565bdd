-- metric: One class per request (ungraded, answered, missing, dropped, buried, unused, unlabeled) with counts and shares.
-- keys: class
{% from "parts/dialect.sql" import list_position with context -%}
CREATE OR REPLACE VIEW failure_taxonomy AS
SELECT {{ groups }}
    taxonomy_class AS class,
    count(*) AS n,
    count(*) / sum(count(*)) OVER ({{ partition }}) AS share
FROM {{ facts }} f
GROUP BY {{ groups }} taxonomy_class
ORDER BY {{ groups }} {{ list_position("['answered', 'unused', 'buried', 'dropped', 'missing', 'unlabeled', 'ungraded']", "class") }};
