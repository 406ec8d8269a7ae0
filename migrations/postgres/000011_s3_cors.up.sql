-- A bucket's CORS configuration: a JSON array of its rules (origins,
-- methods, headers, exposed headers, max age, id). NULL is none.
ALTER TABLE buckets ADD COLUMN cors JSONB;
