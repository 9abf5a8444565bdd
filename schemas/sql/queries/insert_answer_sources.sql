-- Derived rows of one write, registered by the store as _rows.
INSERT INTO answer_sources BY NAME SELECT * FROM _rows;
