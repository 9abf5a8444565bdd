-- A retried export sends the same spans again: the first copy stays.
INSERT OR IGNORE INTO spans BY NAME SELECT * FROM _spans;
