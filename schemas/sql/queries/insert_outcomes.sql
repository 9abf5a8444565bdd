-- Derived rows of one write, registered by the store as _rows.
INSERT INTO outcomes BY NAME SELECT * FROM _rows;
