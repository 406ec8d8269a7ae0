-- Large files as chunks. A chunk is an ordinary files row, a blob placed by
-- its own id, with parent_id naming what it belongs to: the file whose
-- manifest it is part of, or, while an upload session runs, the session's
-- part (upload_parts.part_id). Chunks are ordered by (chunk_part,
-- chunk_index); chunk_offset is where the chunk's bytes start in its file
-- (in its part until the session completes). A manifest is the files row of
-- a chunked file: chunk_count > 0, no copy rows and no blob of its own.
-- Existing rows become what they were: whole-file blobs with no parent.
ALTER TABLE files ADD COLUMN parent_id UUID;
ALTER TABLE files ADD COLUMN chunk_part INTEGER NOT NULL DEFAULT 0 CHECK (chunk_part >= 0);
ALTER TABLE files ADD COLUMN chunk_index INTEGER NOT NULL DEFAULT 0 CHECK (chunk_index >= 0);
ALTER TABLE files ADD COLUMN chunk_offset BIGINT NOT NULL DEFAULT 0 CHECK (chunk_offset >= 0);
ALTER TABLE files ADD COLUMN chunk_count INTEGER NOT NULL DEFAULT 0 CHECK (chunk_count >= 0);

CREATE INDEX files_parent_idx ON files (parent_id, chunk_part, chunk_index) WHERE parent_id IS NOT NULL;
-- The listing and the status counts see only top-level files.
CREATE INDEX files_top_created_at_idx ON files (created_at DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX files_top_status_idx ON files (status) WHERE parent_id IS NULL;
-- The durability report and the repair queue leave manifests out (their
-- chunks are counted): the covering index carries chunk_count too.
DROP INDEX files_durability_idx;
CREATE INDEX files_durability_idx ON files (status, active_copies, replication_factor, size_bytes, chunk_count);

CREATE TABLE upload_sessions (
    id              UUID        PRIMARY KEY,
    file_name       TEXT    NOT NULL,
    content_type    TEXT    NOT NULL,
    expected_sha256 TEXT    NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX upload_sessions_expires_at_idx ON upload_sessions (expires_at);

-- One row per attempt at a part: done = false while its chunks are written, true
-- once they all are. A finished attempt replaces the earlier ones with its
-- number (their chunks are deleted).
CREATE TABLE upload_parts (
    part_id    UUID    PRIMARY KEY,
    session_id UUID    NOT NULL REFERENCES upload_sessions (id) ON DELETE CASCADE,
    number     INTEGER NOT NULL CHECK (number BETWEEN 1 AND 10000),
    done       BOOLEAN NOT NULL DEFAULT false,
    size_bytes BIGINT  NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    sha256     TEXT    NOT NULL DEFAULT '',
    md5        TEXT    NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX upload_parts_session_idx ON upload_parts (session_id, number);
