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

-- The triggers kept the column right until now, so it is not counted again
-- (a recount reads every file's copies: 0.8 s per 100,000 files in SQLite).

-- The index of copies by node and status no longer carries file_id: with
-- it, every new ACTIVE copy landed at a random place among its node's
-- copies (file ids are random UUIDs), a page of its own to write at the
-- commit and again at the checkpoint. Without it the entries of one node
-- and status are in rowid order, so new copies append to the index's end;
-- the few queries that need the file id (a node's files, the copies on down
-- nodes) read it from the row, in rowid order.
DROP INDEX file_replicas_node_status_idx;
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status);

-- Two indexes of files that no statement reads, each written by every
-- upload: files_created_at_idx (the listing shows top-level files only and
-- reads files_top_created_at_idx, migration 6) and files_primary_node_id_idx
-- (nothing looks files up by primary, and a storage_nodes row is never
-- deleted nor renamed, so the foreign key never searches for its files).
DROP INDEX files_created_at_idx;
DROP INDEX files_primary_node_id_idx;
