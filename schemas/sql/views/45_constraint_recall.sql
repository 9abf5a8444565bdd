-- metric: Constraint recall by context-length bucket: required qualifiers (from the merged outcome) that the answer kept, and the share of requests that omitted at least one.
-- keys: context_bucket
{% from "parts/dialect.sql" import list_position with context -%}
CREATE OR REPLACE VIEW constraint_recall AS
SELECT {{ groups }}
    context_bucket,
    count(*) AS requests,
    sum(n_required) AS required,
    sum(n_recalled) AS recalled,
    sum(n_recalled) / nullif(sum(n_required), 0) AS recall,
    wilson_low(sum(n_recalled), sum(n_required)) AS ci_low,
    wilson_high(sum(n_recalled), sum(n_required)) AS ci_high,
    count(*) FILTER (WHERE n_recalled < n_required) AS omitting,
    count(*) FILTER (WHERE n_recalled < n_required) / count(*) AS omission_rate
FROM {{ facts }} f
WHERE n_required > 0
GROUP BY {{ groups }} context_bucket
ORDER BY {{ groups }} {{ list_position("['<4k', '4k-16k', '16k-64k', '64k+']", "context_bucket") }};
