-- Per player and `window: day` filter, the served day results added up per ISO week, month and
-- every night held: what the service counted for the filter, whatever the lake's entries hold.
WITH periods AS (
    SELECT
        d.*,
        p.period,
        CASE p.period
            WHEN 'day' THEN d.day
            WHEN 'week' THEN date_trunc('week', d.day)::DATE
            WHEN 'month' THEN date_trunc('month', d.day)::DATE
        END AS period_start
    FROM {{ ref('player_daily_results') }} AS d
    CROSS JOIN (VALUES ('day'), ('week'), ('month'), ('all')) AS p(period)
)
SELECT
    network,
    player,
    filter_name,
    period,
    period_start,
    count(*) AS days_harvested,
    sum(tournaments)::BIGINT AS entries,
    sum(buy_ins_usd) AS buy_ins_usd,
    sum(buy_ins_usd) / nullif(sum(tournaments), 0) AS abi_usd,
    sum(profit_usd) AS profit_usd,
    100 * sum(profit_usd) / nullif(sum(buy_ins_usd), 0) AS total_roi_pct
FROM periods
GROUP BY network, player, filter_name, period, period_start
