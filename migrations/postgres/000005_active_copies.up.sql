-- How many ACTIVE copies each file has, kept by the database itself: the
-- trigger below moves it with every insert, status change and delete of a
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

CREATE FUNCTION file_replicas_count_active() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.file_id = NEW.file_id THEN
        RETURN NULL; -- a new version of the same state moves nothing
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'ACTIVE' THEN
        UPDATE files SET active_copies = active_copies - 1 WHERE id = OLD.file_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'ACTIVE' THEN
        UPDATE files SET active_copies = active_copies + 1 WHERE id = NEW.file_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER file_replicas_count_active
AFTER INSERT OR DELETE OR UPDATE OF status, file_id ON file_replicas
FOR EACH ROW EXECUTE FUNCTION file_replicas_count_active();
