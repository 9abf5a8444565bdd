-- Spans that reached the collector with attributes cut by the sending SDK's attribute limit
-- (128 per span by default in the OTel SDKs): their requests may be incomplete.
CREATE OR REPLACE VIEW attribute_limits AS
SELECT
    service,
    count(*) AS spans_cut,
    sum(dropped_attributes_count) AS attributes_dropped,
    max(received_at) AS last_seen,
    'The OTel SDK of ' || service || ' dropped '
        || sum(dropped_attributes_count) || ' attribute(s) from ' || count(*)
        || ' span(s) at its attribute limit (128 per span by default); raise '
        || 'OTEL_ATTRIBUTE_COUNT_LIMIT (or OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT) in the app''s '
        || 'environment, or send chunks as midtrace''s parallel arrays.' AS advice
FROM (SELECT coalesce(service, '(no service.name)') AS service, dropped_attributes_count,
             received_at
      FROM spans WHERE dropped_attributes_count > 0)
GROUP BY service;
