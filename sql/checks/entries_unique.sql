-- Entries are one row per (network, tournament_id, player): the number of duplicated keys.
SELECT count(*) AS duplicates
FROM (SELECT network, tournament_id, player FROM tournament_entries GROUP BY ALL HAVING count(*) > 1);
