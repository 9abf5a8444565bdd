-- engine: clickhouse
-- The columns of each view the refresh copies and of its copy (queries/create_evidence_scopes.sql),
-- in order, to find a copy whose view has changed.
SELECT table, groupArray(name || ' ' || type) AS columns
FROM (SELECT table, name, type FROM system.columns
      WHERE database = currentDatabase() AND has({tables:Array(String)}, table)
        AND name NOT IN ('scope', 'scoped_at')
      ORDER BY table, position)
GROUP BY table;
