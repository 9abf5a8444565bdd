-- Each distinct text once: a text already stored by an earlier write is left as it is.
INSERT OR IGNORE INTO texts SELECT * FROM _texts;
