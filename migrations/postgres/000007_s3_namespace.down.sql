DROP INDEX IF EXISTS multipart_uploads_bucket_key_idx;
DROP TABLE IF EXISTS multipart_uploads;
DROP INDEX IF EXISTS objects_file_id_idx;
DROP TABLE IF EXISTS objects;
DROP TABLE IF EXISTS buckets;
DROP TABLE IF EXISTS access_keys;
