-- Each watched player's results, with the tournament and the money in USD at the rates of the
-- night the tournament started in (its UTC start day's metadata), whichever night's harvest
-- listed the entry: a later night never moves a finished night's USD. Without that night's
-- rates in the warehouse, the latest earlier night's convert it (before the first night held:
-- the first night's), flagged. profit = prize − stake − rake (prize 0 when the player did not cash).
WITH rate_nights AS (  -- the nights whose metadata rates the warehouse holds
    SELECT DISTINCT snapshot_date AS night FROM {{ source('warehouse', 'currencies') }}
),
entries AS (
    SELECT
        e.*,
        t.name AS tournament_name,
        t.started_at,
        t.game,
        t.game_class,
        t.structure,
        t.flags,
        t.total_entrants,
        t.players_per_table,
        coalesce((t.started_at AT TIME ZONE 'UTC')::DATE, e.snapshot_date) AS start_day
    FROM {{ source('warehouse', 'tournament_entries') }} AS e
    LEFT JOIN {{ source('warehouse', 'tournaments') }} AS t USING (network, tournament_id)
),
rates_of_night AS (
    SELECT e.*, coalesce(n.night, (SELECT min(night) FROM rate_nights)) AS usd_rate_night
    FROM entries AS e
    ASOF LEFT JOIN rate_nights AS n ON e.start_day >= n.night
),
rated AS (
    SELECT
        r.*,
        CASE WHEN r.currency = 'USD' THEN 1.0 WHEN c.rate_known THEN c.rate END AS rate
    FROM rates_of_night AS r
    LEFT JOIN {{ source('warehouse', 'currencies') }} AS c ON c.snapshot_date = r.usd_rate_night AND c.iso = r.currency
)
SELECT
    network,
    player,
    tournament_id,
    tournament_name,
    started_at,
    game,
    game_class,
    structure,
    flags,
    total_entrants,
    players_per_table,
    position,
    cashed,
    currency,
    stake,
    rake,
    stake + rake AS buy_in,
    prize,
    profit,
    stake / rate AS stake_usd,
    rake / rate AS rake_usd,
    (stake + rake) / rate AS buy_in_usd,
    prize / rate AS prize_usd,
    profit / rate AS profit_usd,
    rate AS usd_rate,
    usd_rate_night,
    coalesce(currency <> 'USD' AND usd_rate_night IS DISTINCT FROM start_day, false) AS usd_rate_of_another_night,
    rate IS NULL AS usd_rate_missing,
    snapshot_date
FROM rated
