DROP TABLE IF EXISTS rebalance_epochs;
ALTER TABLE storage_nodes DROP COLUMN disk_id;
