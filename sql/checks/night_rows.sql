-- Rows the night brought into the snapshot tables.
SELECT
    (SELECT count(*) FROM player_snapshots WHERE snapshot_date = $night) AS player_snapshots,
    (SELECT count(*) FROM player_statistics WHERE snapshot_date = $night) AS player_statistics;
