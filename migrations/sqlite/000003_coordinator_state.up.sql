-- Small named records that background work keeps across restarts, such as
-- the anti-entropy sweep's cursor; the same table as in the PostgreSQL
-- schema of this version.
CREATE TABLE coordinator_state (
    key        TEXT    PRIMARY KEY NOT NULL CHECK (key <> ''),
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
