-- metric: Accuracy of graded requests by the slot of their decisive evidence among the k chunks in the prompt (the U-curve), with Wilson 95% intervals.
-- keys: k, slot
{% from "parts/accuracy.sql" import accuracy_columns %}
CREATE OR REPLACE VIEW accuracy_by_slot AS
SELECT {{ groups }}
    k,
    decisive_slot AS slot,
    {{ accuracy_columns() }}
FROM {{ facts }} f
WHERE decisive_slot IS NOT NULL AND condition IS DISTINCT FROM 'absent'
GROUP BY {{ groups }} k, decisive_slot
ORDER BY ALL;
