-- A node's failure domain and relative size. zone and weight are what the
-- node reports (STORAGE_ZONE, STORAGE_WEIGHT); zone_override and
-- weight_override what an operator set over the admin API, which win while
-- they are not NULL. A NULL zone means none (the node is a zone of its
-- own); a NULL weight means 1. An empty zone_override is an override to "no
-- zone". Rows written before this version read as no zone, weight 1: the
-- ring they give is the ring they gave.
ALTER TABLE storage_nodes ADD COLUMN zone TEXT CHECK (zone <> '');
ALTER TABLE storage_nodes ADD COLUMN weight REAL CHECK (weight > 0);
ALTER TABLE storage_nodes ADD COLUMN zone_override TEXT;
ALTER TABLE storage_nodes ADD COLUMN weight_override REAL CHECK (weight_override > 0);
