CREATE TRIGGER file_replicas_active_insert AFTER INSERT ON file_replicas
WHEN NEW.status = 'ACTIVE'
BEGIN
    UPDATE files SET active_copies = active_copies + 1 WHERE id = NEW.file_id;
END;

CREATE TRIGGER file_replicas_active_delete AFTER DELETE ON file_replicas
WHEN OLD.status = 'ACTIVE'
BEGIN
    UPDATE files SET active_copies = active_copies - 1 WHERE id = OLD.file_id;
END;

CREATE TRIGGER file_replicas_active_update AFTER UPDATE OF status, file_id ON file_replicas
WHEN OLD.file_id <> NEW.file_id OR (OLD.status = 'ACTIVE') <> (NEW.status = 'ACTIVE')
BEGIN
    UPDATE files SET active_copies = active_copies - 1 WHERE id = OLD.file_id AND OLD.status = 'ACTIVE';
    UPDATE files SET active_copies = active_copies + 1 WHERE id = NEW.file_id AND NEW.status = 'ACTIVE';
END;

UPDATE files SET active_copies = (
    SELECT count(*) FROM file_replicas r WHERE r.file_id = files.id AND r.status = 'ACTIVE');

DROP INDEX file_replicas_node_status_idx;
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status, file_id);

CREATE INDEX files_created_at_idx ON files (created_at DESC, id DESC);
CREATE INDEX files_primary_node_id_idx ON files (primary_node_id);
