-- Player snapshots the warehouse holds for the night (compared with the rows the lake gave).
SELECT count(*) FROM player_snapshots WHERE snapshot_date = $night;
