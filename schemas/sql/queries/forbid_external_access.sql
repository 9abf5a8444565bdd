-- Reads never need a file or the network once the database is open; this turns DuckDB's
-- access to them off for the whole database, irreversibly for the connection's lifetime.
SET enable_external_access = false;
