-- Two indexes repeat a prefix of another index on the same table, so every
-- write that touched them paid for an index no query needs:
--   files_status_idx (status)             is a prefix of files_status_updated_at_idx (status, updated_at);
--   file_replicas_file_id_idx (file_id)   is a prefix of file_replicas_file_node_key (file_id, node_id).
DROP INDEX IF EXISTS files_status_idx;
DROP INDEX IF EXISTS file_replicas_file_id_idx;
