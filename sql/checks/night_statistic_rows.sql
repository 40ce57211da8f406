-- Player statistics the warehouse holds for the night (compared with the rows the lake gave).
SELECT count(*) FROM player_statistics WHERE snapshot_date = $night;
