DROP TABLE IF EXISTS coordinator_state;
