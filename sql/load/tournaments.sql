-- Load one night of tournaments from its lake partition ($files: the night's Parquet parts).
-- Kind: dedup.
-- Deduplicated on (network, tournament_id) across nights: the latest snapshot wins, an older night never
-- overwrites a newer row, and loading a night twice changes nothing.

-- name: merge
MERGE INTO tournaments AS t
USING (
    SELECT
        snapshot_date,
        network,
        tournament_id,
        name,
        started_at,
        duration_s,
        currency,
        stake,
        stake_usd,
        rake,
        rake_usd,
        buy_in,
        buy_in_usd,
        prize_pool,
        prize_pool_usd,
        guarantee,
        guarantee_usd,
        overlay,
        overlay_usd,
        re_entries,
        total_entrants,
        players_per_table,
        game,
        game_class,
        structure,
        flags,
        state,
        usd_rate,
        usd_rate_missing,
        extra
    FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true)
    QUALIFY row_number() OVER (PARTITION BY network, tournament_id ORDER BY snapshot_date DESC) = 1
) AS s
ON t.network = s.network AND t.tournament_id = s.tournament_id
WHEN MATCHED AND s.snapshot_date >= t.snapshot_date THEN UPDATE SET
    snapshot_date = s.snapshot_date,
    name = s.name,
    started_at = s.started_at,
    duration_s = s.duration_s,
    currency = s.currency,
    stake = s.stake,
    stake_usd = s.stake_usd,
    rake = s.rake,
    rake_usd = s.rake_usd,
    buy_in = s.buy_in,
    buy_in_usd = s.buy_in_usd,
    prize_pool = s.prize_pool,
    prize_pool_usd = s.prize_pool_usd,
    guarantee = s.guarantee,
    guarantee_usd = s.guarantee_usd,
    overlay = s.overlay,
    overlay_usd = s.overlay_usd,
    re_entries = s.re_entries,
    total_entrants = s.total_entrants,
    players_per_table = s.players_per_table,
    game = s.game,
    game_class = s.game_class,
    structure = s.structure,
    flags = s.flags,
    state = s.state,
    usd_rate = s.usd_rate,
    usd_rate_missing = s.usd_rate_missing,
    extra = s.extra
WHEN NOT MATCHED THEN INSERT (snapshot_date, network, tournament_id, name, started_at, duration_s, currency, stake, stake_usd, rake, rake_usd, buy_in, buy_in_usd, prize_pool, prize_pool_usd, guarantee, guarantee_usd, overlay, overlay_usd, re_entries, total_entrants, players_per_table, game, game_class, structure, flags, state, usd_rate, usd_rate_missing, extra)
    VALUES (s.snapshot_date, s.network, s.tournament_id, s.name, s.started_at, s.duration_s, s.currency, s.stake, s.stake_usd, s.rake, s.rake_usd, s.buy_in, s.buy_in_usd, s.prize_pool, s.prize_pool_usd, s.guarantee, s.guarantee_usd, s.overlay, s.overlay_usd, s.re_entries, s.total_entrants, s.players_per_table, s.game, s.game_class, s.structure, s.flags, s.state, s.usd_rate, s.usd_rate_missing, s.extra);
