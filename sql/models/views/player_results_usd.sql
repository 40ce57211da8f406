-- Each watched player's results, with the tournament and the profit in USD.
-- profit = prize − stake − rake (prize 0 when the player did not cash).
SELECT
    e.network,
    e.player,
    e.tournament_id,
    t.name AS tournament_name,
    t.started_at,
    t.game,
    t.game_class,
    t.structure,
    t.flags,
    t.total_entrants,
    e.position,
    e.cashed,
    e.currency,
    e.stake,
    e.rake,
    e.stake + e.rake AS buy_in,
    e.prize,
    e.profit,
    e.stake / e.usd_rate AS stake_usd,
    e.rake / e.usd_rate AS rake_usd,
    (e.stake + e.rake) / e.usd_rate AS buy_in_usd,
    e.prize_usd,
    e.profit_usd,
    e.usd_rate_missing,
    e.snapshot_date
FROM {{ source('warehouse', 'tournament_entries') }} AS e
LEFT JOIN {{ source('warehouse', 'tournaments') }} AS t USING (network, tournament_id)
