-- Load one night of tournament_entries from its lake partition ($files: the night's Parquet parts).
-- Kind: dedup.
-- Deduplicated on (network, tournament_id, player) across nights: the latest snapshot wins, an older night never
-- overwrites a newer row, and loading a night twice changes nothing.

-- name: merge
MERGE INTO tournament_entries AS t
USING (
    SELECT
        snapshot_date,
        network,
        tournament_id,
        player,
        position,
        cashed,
        prize,
        prize_usd,
        multientries,
        currency,
        stake,
        rake,
        profit,
        profit_usd,
        usd_rate,
        usd_rate_missing
    FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true)
    QUALIFY row_number() OVER (PARTITION BY network, tournament_id, player ORDER BY snapshot_date DESC) = 1
) AS s
ON t.network = s.network AND t.tournament_id = s.tournament_id AND t.player = s.player
WHEN MATCHED AND s.snapshot_date >= t.snapshot_date THEN UPDATE SET
    snapshot_date = s.snapshot_date,
    position = s.position,
    cashed = s.cashed,
    prize = s.prize,
    prize_usd = s.prize_usd,
    multientries = s.multientries,
    currency = s.currency,
    stake = s.stake,
    rake = s.rake,
    profit = s.profit,
    profit_usd = s.profit_usd,
    usd_rate = s.usd_rate,
    usd_rate_missing = s.usd_rate_missing
WHEN NOT MATCHED THEN INSERT (snapshot_date, network, tournament_id, player, position, cashed, prize, prize_usd, multientries, currency, stake, rake, profit, profit_usd, usd_rate, usd_rate_missing)
    VALUES (s.snapshot_date, s.network, s.tournament_id, s.player, s.position, s.cashed, s.prize, s.prize_usd, s.multientries, s.currency, s.stake, s.rake, s.profit, s.profit_usd, s.usd_rate, s.usd_rate_missing);
