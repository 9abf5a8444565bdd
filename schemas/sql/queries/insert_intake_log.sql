-- Acknowledged exports, appended as one group commit.
INSERT INTO intake_log SELECT * FROM _intake;
