{#- Whose grades count (docs/grading.md, "Whose grades count"): the `grader=` filter.

      all (or unset)   the merged outcome: person over references over judge, field by field
      person, references, judge
                       that kind's own verdict (request_evidence.correct_<kind>, score_<kind>)
                       in place of the merged one: a request that kind did not grade counts
                       as ungraded. The decisive chunks stay the merged ones.

    taxonomy_class(correct) and unsupported_confidence(correct, high_confidence) are the one
    definition request_facts and the per-grader facts share. -#}
{%- macro taxonomy_class(correct) -%}
CASE
        WHEN {{ correct }} IS NULL THEN 'ungraded'
        WHEN {{ correct }} THEN 'answered'
        WHEN n_decisive = 0 THEN 'unlabeled'
        WHEN n_decisive_retrieved = 0 THEN 'missing'
        WHEN n_decisive_in_prompt = 0 THEN 'dropped'
        WHEN decisive_at_edge THEN 'unused'
        ELSE 'buried'
    END
{%- endmacro -%}

{%- macro unsupported_confidence(correct, high_confidence) -%}
coalesce({{ correct }} = false AND n_decisive_in_prompt > 0 AND confidence >= {{ high_confidence }}, false)
{%- endmacro -%}

{#- request_facts as one kind of grader sees it; request_facts itself for all. With
    `every_kind`, request_facts_all: requests of every kind, not only `rag` ones (the requests
    list; docs/metrics.md, "Request kinds"). -#}
{%- macro graded_facts(grader, every_kind=False) -%}
{%- set relation = "request_facts_all" if every_kind else "request_facts" -%}
{%- if grader in (None, "all") -%}
{{ relation }}
{%- elif grader in ("person", "references", "judge") -%}
(SELECT * REPLACE (
        correct_{{ grader }} AS correct,
        score_{{ grader }} AS score,
        CASE WHEN correct_{{ grader }} IS NOT NULL THEN '{{ grader }}' END AS grader,
        CASE WHEN kind = 'rag' THEN {{ taxonomy_class("correct_" ~ grader) }} END AS taxonomy_class,
        {{ unsupported_confidence("correct_" ~ grader, "(SELECT high_confidence FROM metric_settings)") }} AS unsupported_confidence)
    FROM {{ relation }})
{%- else -%}
{{ fail("unknown grader " ~ grader) }}
{%- endif -%}
{%- endmacro -%}
