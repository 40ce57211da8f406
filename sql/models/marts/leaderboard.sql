-- The watchlist ranked per period by profit, total ROI and entries; only players with at least
-- `leaderboard_min_entries` entries in the period (a dbt var) qualify and are ranked. A player
-- whose results the service withheld on some night of the period says so (`nights_withheld`);
-- one the warehouse holds no entry of is listed with NULL measures, never ranked as a zero.
WITH withheld AS (
    SELECT w.network, w.player, {{ period_columns('w.snapshot_date') }}, count(DISTINCT w.snapshot_date) AS nights_withheld
    FROM {{ ref('player_summaries_withheld') }} AS w
    {{ periods('w.snapshot_date') }}
    GROUP BY ALL
),
players AS (
    SELECT
        coalesce(r.period, w.period) AS period,
        coalesce(r.period_start, w.period_start) AS period_start,
        coalesce(r.network, w.network) AS network,
        coalesce(r.player, w.player) AS player,
        r.entries,
        coalesce(r.entries >= {{ var('leaderboard_min_entries') }}, false) AS qualified,
        r.buy_ins_usd,
        r.abi_usd,
        r.profit_usd,
        r.total_roi_pct,
        r.avg_roi_pct,
        r.roi_ci_low_pct,
        r.roi_ci_high_pct,
        r.roi_sample_too_small,
        r.itm_pct,
        r.wins,
        coalesce(w.nights_withheld, 0) AS nights_withheld
    FROM {{ ref('player_results_by_period') }} AS r
    FULL JOIN withheld AS w
        ON w.network = r.network AND w.player = r.player AND w.period = r.period
        AND w.period_start IS NOT DISTINCT FROM r.period_start
)
SELECT
    period,
    period_start,
    network,
    player,
    entries,
    qualified,
    {{ var('leaderboard_min_entries') }} AS min_entries,
    CASE WHEN qualified THEN rank() OVER (PARTITION BY period, period_start, qualified ORDER BY profit_usd DESC NULLS LAST) END AS rank_by_profit,
    CASE WHEN qualified THEN rank() OVER (PARTITION BY period, period_start, qualified ORDER BY total_roi_pct DESC NULLS LAST) END AS rank_by_roi,
    CASE WHEN qualified THEN rank() OVER (PARTITION BY period, period_start, qualified ORDER BY entries DESC) END AS rank_by_entries,
    buy_ins_usd,
    abi_usd,
    profit_usd,
    total_roi_pct,
    avg_roi_pct,
    roi_ci_low_pct,
    roi_ci_high_pct,
    roi_sample_too_small,
    itm_pct,
    wins,
    nights_withheld,
    CASE WHEN nights_withheld > 0 THEN 'not_authorized' END AS withheld_reason,
    (count(*) FILTER (WHERE nights_withheld > 0) OVER (PARTITION BY period, period_start))::BIGINT AS players_withheld
FROM players
