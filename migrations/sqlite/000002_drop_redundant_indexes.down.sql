CREATE INDEX IF NOT EXISTS files_status_idx ON files (status);
CREATE INDEX IF NOT EXISTS file_replicas_file_id_idx ON file_replicas (file_id);
