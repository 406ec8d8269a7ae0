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

UPDATE files SET active_copies = (
    SELECT count(*) FROM file_replicas r WHERE r.file_id = files.id AND r.status = 'ACTIVE');
