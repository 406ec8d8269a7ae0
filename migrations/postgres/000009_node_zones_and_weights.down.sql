ALTER TABLE storage_nodes DROP COLUMN IF EXISTS weight_override;
ALTER TABLE storage_nodes DROP COLUMN IF EXISTS zone_override;
ALTER TABLE storage_nodes DROP COLUMN IF EXISTS weight;
ALTER TABLE storage_nodes DROP COLUMN IF EXISTS zone;
