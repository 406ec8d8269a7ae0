ALTER TABLE storage_nodes DROP COLUMN weight_override;
ALTER TABLE storage_nodes DROP COLUMN zone_override;
ALTER TABLE storage_nodes DROP COLUMN weight;
ALTER TABLE storage_nodes DROP COLUMN zone;
