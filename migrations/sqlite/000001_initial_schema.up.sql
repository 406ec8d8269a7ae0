-- The embedded metadata store: the same tables, constraints and indexes as the
-- PostgreSQL schema of the same version. Timestamps are INTEGER microseconds
-- since the Unix epoch (UTC), so they sort and compare in SQL; ids are the
-- canonical lower-case UUID text, which sorts as PostgreSQL sorts UUIDs.
-- Tables are STRICT so a value of the wrong type is refused, as PostgreSQL
-- would refuse it.

CREATE TABLE storage_nodes (
    node_id               TEXT    PRIMARY KEY NOT NULL CHECK (node_id <> ''),
    host                  TEXT    NOT NULL CHECK (host <> ''),
    port                  INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
    status                TEXT    NOT NULL CHECK (status IN ('HEALTHY', 'UNHEALTHY', 'DEREGISTERED')),
    registered_at         INTEGER NOT NULL,
    last_check_at         INTEGER,
    last_healthy_at       INTEGER,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    consecutive_successes INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_successes >= 0),
    version               INTEGER NOT NULL DEFAULT 1
) STRICT;

CREATE INDEX storage_nodes_status_idx ON storage_nodes (status);

CREATE TABLE files (
    id                 TEXT    PRIMARY KEY NOT NULL CHECK (length(id) = 36),
    file_name          TEXT    NOT NULL,
    content_type       TEXT    NOT NULL,
    size_bytes         INTEGER NOT NULL CHECK (size_bytes >= 0),
    checksum           TEXT,
    status             TEXT    NOT NULL CHECK (status IN ('PENDING', 'ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED', 'DELETED')),
    status_reason      TEXT,
    primary_node_id    TEXT    REFERENCES storage_nodes (node_id),
    replication_factor INTEGER NOT NULL CHECK (replication_factor >= 1),
    ring_position      INTEGER NOT NULL CHECK (ring_position >= 0),
    idempotency_key    TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL DEFAULT 1
) STRICT;

CREATE UNIQUE INDEX files_idempotency_key_key ON files (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX files_status_idx ON files (status);
CREATE INDEX files_created_at_idx ON files (created_at DESC, id DESC);
CREATE INDEX files_primary_node_id_idx ON files (primary_node_id);
CREATE INDEX files_ring_position_idx ON files (ring_position);
CREATE INDEX files_status_updated_at_idx ON files (status, updated_at);

-- AUTOINCREMENT so a deleted copy's id is never handed out again, as with a
-- PostgreSQL sequence.
CREATE TABLE file_replicas (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id    TEXT    NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    node_id    TEXT    NOT NULL REFERENCES storage_nodes (node_id),
    status     TEXT    NOT NULL CHECK (status IN ('PENDING', 'ACTIVE', 'FAILED', 'DELETING')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version    INTEGER NOT NULL DEFAULT 1,
    CONSTRAINT file_replicas_file_node_key UNIQUE (file_id, node_id)
) STRICT;

CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status);
CREATE INDEX file_replicas_file_id_idx ON file_replicas (file_id);

CREATE TABLE leases (
    name       TEXT    PRIMARY KEY NOT NULL,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
