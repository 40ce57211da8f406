-- Per player and `window: day` filter, the served day results added up per period (the macro
-- periods()): what the service counted for the filter, whatever the lake's entries hold. Days
-- whose statistics the service withheld are left out of the sums and counted.
WITH periods AS (
    SELECT d.*, {{ period_columns('d.day') }}
    FROM {{ ref('player_daily_results') }} AS d
    {{ periods('d.day') }}
)
SELECT
    network,
    player,
    filter_name,
    period,
    period_start,
    count(*) AS days_harvested,
    count(*) FILTER (WHERE withheld) AS days_withheld,
    sum(tournaments)::BIGINT AS entries,
    sum(buy_ins_usd) AS buy_ins_usd,
    sum(buy_ins_usd) / nullif(sum(tournaments), 0) AS abi_usd,
    sum(profit_usd) AS profit_usd,
    100 * sum(profit_usd) / nullif(sum(buy_ins_usd), 0) AS total_roi_pct
FROM periods
GROUP BY network, player, filter_name, period, period_start
