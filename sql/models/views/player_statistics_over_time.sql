-- Every statistic night by night, with the change since the previous harvest.
SELECT
    snapshot_date,
    network,
    player,
    filter_name,
    statistic,
    type,
    value,
    value_number,
    value_usd,
    value_time,
    value_number - lag(value_number) OVER w AS change,
    value_usd - lag(value_usd) OVER w AS change_usd,
    lag(snapshot_date) OVER w AS previous_snapshot_date
FROM {{ source('warehouse', 'player_statistics') }}
WINDOW w AS (PARTITION BY network, player, filter_name, statistic ORDER BY snapshot_date)
