-- The S3 namespace and the access keys. A key's bytes are BYTEA so that
-- listings sort them by byte, as S3 does, whatever the database's
-- collation, and a range read can end at any byte string. An object refers
-- to its file: deleting the file row takes the key with it, so a key never
-- names a file that is gone.
CREATE TABLE access_keys (
    access_key TEXT        PRIMARY KEY,
    name       TEXT        NOT NULL,
    secret     TEXT        NOT NULL,
    admin      BOOLEAN     NOT NULL DEFAULT false,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE buckets (
    name       TEXT        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 63),
    owner      TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE objects (
    bucket       TEXT        NOT NULL REFERENCES buckets (name),
    object_key   BYTEA       NOT NULL CHECK (length(object_key) BETWEEN 1 AND 1024),
    file_id      UUID        NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    size_bytes   BIGINT      NOT NULL CHECK (size_bytes >= 0),
    etag         TEXT        NOT NULL,
    content_type TEXT        NOT NULL,
    headers      JSONB       NOT NULL,
    modified_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (bucket, object_key)
);

CREATE INDEX objects_file_id_idx ON objects (file_id);

-- An S3 multipart upload: its upload session (the file service's) and
-- what the object it makes will be.
CREATE TABLE multipart_uploads (
    upload_id    TEXT        PRIMARY KEY,
    session_id   TEXT        NOT NULL,
    bucket       TEXT        NOT NULL REFERENCES buckets (name),
    object_key   BYTEA       NOT NULL CHECK (length(object_key) BETWEEN 1 AND 1024),
    owner        TEXT        NOT NULL,
    content_type TEXT        NOT NULL,
    headers      JSONB       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

CREATE INDEX multipart_uploads_bucket_key_idx ON multipart_uploads (bucket, object_key, upload_id);
