-- engine: clickhouse
-- Every computed request_evidence row, before they are all computed again by a changed
-- definition (a new row would tie with the old one of the same version).
TRUNCATE TABLE request_evidence_versions;
