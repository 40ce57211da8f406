-- One row per player and UTC day they played: the day's entries, buy-ins and profit in USD, whether
-- it was won, lost or broken even, and the run of won (lost) days it is in: how long up to it, and
-- its first day. Runs count days played in a row: a day without entries neither breaks nor extends one.
WITH days AS (
    SELECT
        network,
        player,
        day,
        count(*) AS entries,
        count(profit_usd) AS entries_in_usd,
        sum(buy_in_usd) AS buy_ins_usd,
        sum(profit_usd) AS profit_usd
    FROM {{ ref('player_entries') }}
    GROUP BY network, player, day
),
results AS (
    SELECT
        *,
        CASE
            WHEN profit_usd IS NULL THEN NULL
            WHEN profit_usd >= 0.005 THEN 'won'
            WHEN profit_usd <= -0.005 THEN 'lost'
            ELSE 'even'
        END AS day_result
    FROM days
),
runs AS (  -- a run is the days in a row with one result: same result, same gap between two day counts
    SELECT
        *,
        row_number() OVER (PARTITION BY network, player ORDER BY day)
            - row_number() OVER (PARTITION BY network, player, day_result ORDER BY day) AS run_id
    FROM results
)
SELECT
    network,
    player,
    day,
    entries,
    entries_in_usd,
    buy_ins_usd,
    profit_usd,
    day_result,
    CASE WHEN day_result IS NOT NULL THEN
        row_number() OVER (PARTITION BY network, player, day_result, run_id ORDER BY day)
    END AS run_days,
    CASE WHEN day_result IS NOT NULL THEN
        min(day) OVER (PARTITION BY network, player, day_result, run_id)
    END AS run_started_on
FROM runs
