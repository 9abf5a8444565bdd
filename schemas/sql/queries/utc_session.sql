-- Reads show times in UTC, whatever the machine's time zone.
SET TimeZone = 'UTC';
