-- Small named records that background work keeps across restarts, such as
-- the anti-entropy sweep's cursor: where its pass stopped and when the last
-- full pass ended. The value is the owner's own encoding (JSON).
CREATE TABLE coordinator_state (
    key        TEXT        PRIMARY KEY CHECK (key <> ''),
    value      TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
