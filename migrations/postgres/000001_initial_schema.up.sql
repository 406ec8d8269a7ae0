-- The metadata of dfs: storage nodes, files, the copies of each file, and the
-- leases coordinators use to run background work one at a time.
-- Every row that more than one writer touches carries a version for optimistic
-- locking. Timestamps are TIMESTAMPTZ, written by the program at microsecond
-- precision in UTC.

CREATE TABLE storage_nodes (
    node_id               TEXT        PRIMARY KEY CHECK (node_id <> ''),
    host                  TEXT        NOT NULL CHECK (host <> ''),
    port                  INTEGER     NOT NULL CHECK (port BETWEEN 1 AND 65535),
    status                TEXT        NOT NULL CHECK (status IN ('HEALTHY', 'UNHEALTHY', 'DEREGISTERED')),
    registered_at         TIMESTAMPTZ NOT NULL,
    last_check_at         TIMESTAMPTZ,
    last_healthy_at       TIMESTAMPTZ,
    consecutive_failures  INTEGER     NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    consecutive_successes INTEGER     NOT NULL DEFAULT 0 CHECK (consecutive_successes >= 0),
    version               BIGINT      NOT NULL DEFAULT 1
);

-- The ring is rebuilt from the healthy nodes at start.
CREATE INDEX storage_nodes_status_idx ON storage_nodes (status);

CREATE TABLE files (
    id                 UUID        PRIMARY KEY,
    file_name          TEXT        NOT NULL,
    content_type       TEXT        NOT NULL,
    size_bytes         BIGINT      NOT NULL CHECK (size_bytes >= 0),
    -- SHA-256 in lower-case hex; NULL until the upload has hashed its body.
    checksum           TEXT,
    status             TEXT        NOT NULL CHECK (status IN ('PENDING', 'ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED', 'DELETED')),
    status_reason      TEXT,
    -- NULL while no copy is confirmed.
    primary_node_id    TEXT        REFERENCES storage_nodes (node_id),
    replication_factor INTEGER     NOT NULL CHECK (replication_factor >= 1),
    -- The ring position of id, kept so a join can select the files of the
    -- arcs that changed owner instead of hashing every id.
    ring_position      BIGINT      NOT NULL CHECK (ring_position >= 0),
    idempotency_key    TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    version            BIGINT      NOT NULL DEFAULT 1
);

-- An upload retried with the same Idempotency-Key finds the first one's file.
CREATE UNIQUE INDEX files_idempotency_key_key ON files (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX files_status_idx ON files (status);
-- Listing is newest first with id as the tie-break, so the index carries both.
CREATE INDEX files_created_at_idx ON files (created_at DESC, id DESC);
CREATE INDEX files_primary_node_id_idx ON files (primary_node_id);
CREATE INDEX files_ring_position_idx ON files (ring_position);
-- The repair loop asks for files of some statuses untouched since a moment.
CREATE INDEX files_status_updated_at_idx ON files (status, updated_at);

CREATE TABLE file_replicas (
    id         BIGSERIAL   PRIMARY KEY,
    file_id    UUID        NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    node_id    TEXT        NOT NULL REFERENCES storage_nodes (node_id),
    status     TEXT        NOT NULL CHECK (status IN ('PENDING', 'ACTIVE', 'FAILED', 'DELETING')),
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    version    BIGINT      NOT NULL DEFAULT 1,
    CONSTRAINT file_replicas_file_node_key UNIQUE (file_id, node_id)
);

-- A node's failure visits only that node's copies.
CREATE INDEX file_replicas_node_status_idx ON file_replicas (node_id, status);
CREATE INDEX file_replicas_file_id_idx ON file_replicas (file_id);

CREATE TABLE leases (
    name       TEXT        PRIMARY KEY,
    owner      TEXT        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
