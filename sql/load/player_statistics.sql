-- Load one night of player_statistics from its lake partition ($files: the night's Parquet parts).
-- Kind: snapshot.
-- Columns are matched by name: a column missing from the files loads as NULL, an unknown one is an error.
-- The night's rows are replaced: delete-then-insert on snapshot_date (idempotent).

-- name: delete
DELETE FROM player_statistics WHERE snapshot_date = $snapshot_date;

-- name: insert
INSERT INTO player_statistics BY NAME
SELECT * FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true);
