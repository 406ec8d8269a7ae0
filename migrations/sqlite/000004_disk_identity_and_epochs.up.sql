-- The same change as the PostgreSQL migration of this version: the identity
-- of a node's data directory (NULL: not known yet), and the one-row record of
-- membership and rebalance epochs, seeded with 0, 0.
ALTER TABLE storage_nodes ADD COLUMN disk_id TEXT CHECK (disk_id <> '');

CREATE TABLE rebalance_epochs (
    id         INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    membership INTEGER NOT NULL CHECK (membership >= 0),
    rebalanced INTEGER NOT NULL CHECK (rebalanced >= 0 AND rebalanced <= membership)
) STRICT;

INSERT INTO rebalance_epochs (id, membership, rebalanced) VALUES (1, 0, 0);
