-- The S3 namespace and the access keys. A key's bytes are a BLOB so that
-- listings sort them by byte (memcmp), as S3 does, and a range read can end
-- at any byte string. An object refers to its file: deleting the file row
-- takes the key with it, so a key never names a file that is gone.
CREATE TABLE access_keys (
    access_key TEXT    PRIMARY KEY NOT NULL,
    name       TEXT    NOT NULL,
    secret     TEXT    NOT NULL,
    admin      INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE buckets (
    name       TEXT    PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 63),
    owner      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE objects (
    bucket       TEXT    NOT NULL REFERENCES buckets (name),
    object_key   BLOB    NOT NULL CHECK (length(object_key) BETWEEN 1 AND 1024),
    file_id      TEXT    NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    size_bytes   INTEGER NOT NULL CHECK (size_bytes >= 0),
    etag         TEXT    NOT NULL,
    content_type TEXT    NOT NULL,
    headers      TEXT    NOT NULL,
    modified_at  INTEGER NOT NULL,
    PRIMARY KEY (bucket, object_key)
) STRICT, WITHOUT ROWID;

CREATE INDEX objects_file_id_idx ON objects (file_id);

-- An S3 multipart upload: its upload session (the file service's) and
-- what the object it makes will be.
CREATE TABLE multipart_uploads (
    upload_id    TEXT    PRIMARY KEY NOT NULL,
    session_id   TEXT    NOT NULL,
    bucket       TEXT    NOT NULL REFERENCES buckets (name),
    object_key   BLOB    NOT NULL CHECK (length(object_key) BETWEEN 1 AND 1024),
    owner        TEXT    NOT NULL,
    content_type TEXT    NOT NULL,
    headers      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX multipart_uploads_bucket_key_idx ON multipart_uploads (bucket, object_key, upload_id);
