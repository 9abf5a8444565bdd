-- Chunk texts of one write, registered by the store as _rows; a text already stored (the
-- same content hash) is left as it is.
INSERT OR IGNORE INTO chunk_texts SELECT * FROM _rows;
