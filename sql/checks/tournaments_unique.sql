-- Tournaments are one row per (network, tournament_id): the number of duplicated keys.
SELECT count(*) AS duplicates
FROM (SELECT network, tournament_id FROM tournaments GROUP BY ALL HAVING count(*) > 1);
