-- The table takes its columns from the view it is kept equal to; it is filled afterwards.
CREATE OR REPLACE TABLE request_evidence AS SELECT * FROM request_evidence_live LIMIT 0;
