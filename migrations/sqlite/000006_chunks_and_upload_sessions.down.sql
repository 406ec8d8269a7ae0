DROP TABLE IF EXISTS upload_parts;
DROP TABLE IF EXISTS upload_sessions;
DROP INDEX IF EXISTS files_durability_idx;
CREATE INDEX files_durability_idx ON files (status, active_copies, replication_factor, size_bytes);
DROP INDEX IF EXISTS files_top_status_idx;
DROP INDEX IF EXISTS files_top_created_at_idx;
DROP INDEX IF EXISTS files_parent_idx;
-- Chunk rows cannot be read as whole files without their manifest.
DELETE FROM files WHERE parent_id IS NOT NULL OR chunk_count > 0;
ALTER TABLE files DROP COLUMN chunk_count;
ALTER TABLE files DROP COLUMN chunk_offset;
ALTER TABLE files DROP COLUMN chunk_index;
ALTER TABLE files DROP COLUMN chunk_part;
ALTER TABLE files DROP COLUMN parent_id;
