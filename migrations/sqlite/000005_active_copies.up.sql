-- How many ACTIVE copies each file has, kept by the database itself: the
-- triggers below move it with every insert, status change and delete of a
-- copy, so no write path of the store can forget it. The durability report
-- then groups files by it over a covering index instead of counting every
-- file's copies, and corrects only the files that have copies on nodes
-- that are not healthy.
ALTER TABLE files ADD COLUMN active_copies INTEGER NOT NULL DEFAULT 0 CHECK (active_copies >= 0);

UPDATE files SET active_copies = (
    SELECT count(*) FROM file_replicas r WHERE r.file_id = files.id AND r.status = 'ACTIVE');

CREATE INDEX files_durability_idx ON files (status, active_copies, replication_factor, size_bytes);

-- The copies on the nodes that are down, by file, straight from the index.
DROP INDEX file_replicas_node_status_idx;
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status, file_id);

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
