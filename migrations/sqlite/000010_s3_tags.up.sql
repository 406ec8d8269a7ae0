-- S3 tag sets, as JSON arrays of {"k", "v"} in the order they were given.
-- An object's tags are a column of its row, so they belong to the version
-- of the key that row is: a write that moves the key writes its tags with
-- it. An upload keeps the tags its object will have. NULL is no tags.
ALTER TABLE objects ADD COLUMN tags TEXT;
ALTER TABLE multipart_uploads ADD COLUMN tags TEXT;
ALTER TABLE buckets ADD COLUMN tags TEXT;
