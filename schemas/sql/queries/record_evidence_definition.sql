INSERT OR REPLACE INTO derived_state VALUES ('request_evidence', $definition_hash, $built_at);
