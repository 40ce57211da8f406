-- Per-day results from the watchlist's `window: day` filters: each night's statistics describe the
-- tournaments started on that UTC day (Profit, Stake and Rake in USD, Count), so days add up;
-- profit and ROI per day, and cumulative over the days harvested.
WITH daily AS (
    SELECT
        s.snapshot_date AS day,
        s.network,
        s.player,
        s.filter_name,
        coalesce(max(st.value_number) FILTER (WHERE st.statistic = 'Count'), 0)::BIGINT AS tournaments,
        coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Profit'), 0) AS profit_usd,
        coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Stake'), 0)
            + coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Rake'), 0) AS buy_ins_usd
    FROM {{ source('warehouse', 'player_snapshots') }} AS s
    JOIN {{ source('warehouse', 'player_statistics') }} AS st USING (snapshot_date, network, player, filter_name)
    WHERE s.filter_window = 'day'
    GROUP BY ALL
)
SELECT
    day,
    network,
    player,
    filter_name,
    tournaments,
    profit_usd,
    buy_ins_usd,
    100 * profit_usd / nullif(buy_ins_usd, 0) AS roi_pct,
    (sum(tournaments) OVER w)::BIGINT AS cumulative_tournaments,
    sum(profit_usd) OVER w AS cumulative_profit_usd,
    sum(buy_ins_usd) OVER w AS cumulative_buy_ins_usd,
    100 * sum(profit_usd) OVER w / nullif(sum(buy_ins_usd) OVER w, 0) AS cumulative_roi_pct
FROM daily
WINDOW w AS (PARTITION BY network, player, filter_name ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
