-- tourneylake's shared state gets a database of its own beside Dagster's (TOURNEYLAKE_STATE_URL
-- points at it); its tables are made by tourneylake on first use.
CREATE DATABASE tourneylake_state;
