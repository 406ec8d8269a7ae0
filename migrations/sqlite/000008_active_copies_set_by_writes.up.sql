-- files.active_copies is now written by the statements that change a file's
-- copies (the file's own insert and update, which carry the whole copy set,
-- and the two bulk updates that mark copies FAILED or DELETING), not by
-- triggers. Each trigger firing rewrote the file's row and its entry in
-- files_durability_idx once per copy: three times more per upload, on top
-- of the update that sets the file's status. The conformance suite checks
-- the column against a count of the copies after every case.
DROP TRIGGER IF EXISTS file_replicas_active_update;
DROP TRIGGER IF EXISTS file_replicas_active_delete;
DROP TRIGGER IF EXISTS file_replicas_active_insert;

UPDATE files SET active_copies = (
    SELECT count(*) FROM file_replicas r WHERE r.file_id = files.id AND r.status = 'ACTIVE');
