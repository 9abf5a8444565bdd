-- Derived rows of one write, registered by the store as _rows.
INSERT INTO chunks BY NAME SELECT * FROM _rows;
