DROP TRIGGER IF EXISTS file_replicas_active_update;
DROP TRIGGER IF EXISTS file_replicas_active_delete;
DROP TRIGGER IF EXISTS file_replicas_active_insert;
DROP INDEX IF EXISTS files_durability_idx;
DROP INDEX IF EXISTS file_replicas_node_status_idx;
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status);
ALTER TABLE files DROP COLUMN active_copies;
