-- The identity of the data directory a node last reported (a random UUID the
-- node writes at its first start). When a node id comes back with another
-- one, its disk was replaced and every copy the metadata places on it is
-- gone. NULL means not known yet: a node from before identities existed.
ALTER TABLE storage_nodes ADD COLUMN disk_id TEXT CHECK (disk_id <> '');

-- The durable record of rebalance intent, one row: membership counts the
-- changes of the ring's membership (bumped before each change is written),
-- rebalanced is the highest membership epoch a rebalance has completed for.
-- A coordinator that finds rebalanced behind membership (it crashed, or lost
-- its lease, mid-rebalance) runs the rebalance again.
CREATE TABLE rebalance_epochs (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    membership BIGINT  NOT NULL CHECK (membership >= 0),
    rebalanced BIGINT  NOT NULL CHECK (rebalanced >= 0 AND rebalanced <= membership)
);

INSERT INTO rebalance_epochs (id, membership, rebalanced) VALUES (1, 0, 0);
