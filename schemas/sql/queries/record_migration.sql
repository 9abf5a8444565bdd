INSERT INTO schema_migrations VALUES ($version, $name, $applied_at);
