-- Load one night of news from its lake partition ($files: the night's Parquet parts).
-- Kind: reference.
-- Columns are matched by name: a column missing from the files loads as NULL, an unknown one is an error.
-- Reference data: the table holds the latest snapshot only; an older night never replaces a newer one.

-- name: is_latest
SELECT coalesce(max(snapshot_date) <= $snapshot_date, true) FROM news;

-- name: delete
DELETE FROM news;

-- name: insert
INSERT INTO news BY NAME
SELECT * FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true);
