DROP TRIGGER IF EXISTS file_replicas_count_active ON file_replicas;
DROP FUNCTION IF EXISTS file_replicas_count_active();
DROP INDEX IF EXISTS files_durability_idx;
DROP INDEX IF EXISTS file_replicas_node_status_idx;
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status);
ALTER TABLE files DROP COLUMN active_copies;
