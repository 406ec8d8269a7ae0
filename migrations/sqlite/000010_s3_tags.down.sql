ALTER TABLE buckets DROP COLUMN tags;
ALTER TABLE multipart_uploads DROP COLUMN tags;
ALTER TABLE objects DROP COLUMN tags;
