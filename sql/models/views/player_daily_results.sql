-- Per-day results from the watchlist's `window: day` filters: each night's statistics describe the
-- tournaments started on that UTC day (Profit, Stake and Rake in USD, Count), so days add up;
-- profit and ROI per day, and cumulative over the days harvested. A day whose statistics the
-- service withheld is NULL with its reason, never 0, and the cumulative sums leave it out.
-- A table made again at each build: as a view, every read (and `filter_results_by_period`'s)
-- joined the whole history of statistics to find the day filters'.
{{ config(materialized='table') }}
WITH served AS (
    SELECT
        s.snapshot_date AS day,
        s.network,
        s.player,
        s.filter_name,
        max(st.value_number) FILTER (WHERE st.statistic = 'Count' AND st.authorized) AS tournaments,
        max(st.value_usd) FILTER (WHERE st.statistic = 'Profit' AND st.authorized) AS profit_usd,
        max(st.value_usd) FILTER (WHERE st.statistic = 'Stake' AND st.authorized) AS stake_usd,
        max(st.value_usd) FILTER (WHERE st.statistic = 'Rake' AND st.authorized) AS rake_usd
    FROM {{ source('warehouse', 'player_snapshots') }} AS s
    JOIN {{ source('warehouse', 'player_statistics') }} AS st USING (snapshot_date, network, player, filter_name)
    WHERE s.filter_window = 'day'
    GROUP BY ALL
),
daily AS (  -- a day without tournaments is served with Count 0 and no money statistics: $0
    SELECT
        d.day,
        d.network,
        d.player,
        d.filter_name,
        w.withheld_reason,
        CASE WHEN w.withheld_reason IS NULL THEN d.tournaments::BIGINT END AS tournaments,
        CASE WHEN w.withheld_reason IS NULL THEN
            CASE WHEN d.tournaments = 0 THEN coalesce(d.profit_usd, 0) ELSE d.profit_usd END
        END AS profit_usd,
        CASE WHEN w.withheld_reason IS NULL THEN
            CASE WHEN d.tournaments = 0 THEN coalesce(d.stake_usd + d.rake_usd, 0) ELSE d.stake_usd + d.rake_usd END
        END AS buy_ins_usd
    FROM served AS d
    LEFT JOIN {{ ref('player_summaries_withheld') }} AS w
        ON w.snapshot_date = d.day AND w.network = d.network AND w.player = d.player AND w.filter_name = d.filter_name
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
    withheld_reason IS NOT NULL AS withheld,
    withheld_reason,
    (sum(tournaments) OVER w)::BIGINT AS cumulative_tournaments,
    sum(profit_usd) OVER w AS cumulative_profit_usd,
    sum(buy_ins_usd) OVER w AS cumulative_buy_ins_usd,
    100 * sum(profit_usd) OVER w / nullif(sum(buy_ins_usd) OVER w, 0) AS cumulative_roi_pct,
    (count(*) FILTER (WHERE withheld_reason IS NOT NULL) OVER w)::BIGINT AS cumulative_days_withheld
FROM daily
WINDOW w AS (PARTITION BY network, player, filter_name ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
