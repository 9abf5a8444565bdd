-- metric: Judge calibration: on the requests both a person and the LLM judge graded, how often their correct/wrong agree (share, Wilson 95% interval) and Cohen's kappa with an approximate 95% interval.
-- keys:
-- n counts the requests with both a person's and the judge's verdict (each kind's own newest,
-- request_outcomes.correct_person and correct_judge), whatever the grader= filter. Cohen's
-- kappa = (p_o - p_e) / (1 - p_e), p_e from the two graders' marginal shares of correct;
-- its interval is p_o's large-sample standard error scaled by 1 / (1 - p_e) (Cohen 1960),
-- ± 1.96 of it, clamped to [-1, 1]; NULL when p_e = 1 (both graders said the same of every
-- request: kappa is undefined). docs/grading.md, "Judge calibration".
{% from "parts/dialect.sql" import star_except with context -%}
CREATE OR REPLACE VIEW judge_agreement AS
WITH counts AS (
    SELECT {{ groups }}
        count(*) FILTER (WHERE correct_person IS NOT NULL AND correct_judge IS NOT NULL) AS n,
        count(*) FILTER (WHERE correct_person AND correct_judge) AS both_correct,
        count(*) FILTER (WHERE correct_person AND NOT correct_judge) AS person_only_correct,
        count(*) FILTER (WHERE NOT correct_person AND correct_judge) AS judge_only_correct,
        count(*) FILTER (WHERE NOT correct_person AND NOT correct_judge) AS both_wrong
    FROM {{ facts }} f
    GROUP BY ALL
), shares AS (
    SELECT *,
           (both_correct + both_wrong) / nullif(n, 0) AS p_o,
           ((both_correct + person_only_correct) * (both_correct + judge_only_correct)
            + (judge_only_correct + both_wrong) * (person_only_correct + both_wrong))
               / nullif(n * n, 0) AS p_e
    FROM counts
)
SELECT
    {{ star_except("*", "p_o, p_e") }},
    both_correct + both_wrong AS agree,
    p_o AS agreement,
    wilson_low(both_correct + both_wrong, n) AS agreement_ci_low,
    wilson_high(both_correct + both_wrong, n) AS agreement_ci_high,
    CASE WHEN p_e < 1 THEN (p_o - p_e) / (1 - p_e) END AS kappa,
    CASE WHEN p_e < 1 THEN greatest(-1.0, (p_o - p_e) / (1 - p_e)
        - 1.959964 * sqrt(p_o * (1 - p_o) / n) / (1 - p_e)) END AS kappa_ci_low,
    CASE WHEN p_e < 1 THEN least(1.0, (p_o - p_e) / (1 - p_e)
        + 1.959964 * sqrt(p_o * (1 - p_o) / n) / (1 - p_e)) END AS kappa_ci_high
FROM shares;
