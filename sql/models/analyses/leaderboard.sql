-- The watchlist ranked per period by profit, total ROI and entries; only players with at least
-- `leaderboard_min_entries` entries in the period (a dbt var) qualify and are ranked.
SELECT
    period,
    period_start,
    network,
    player,
    entries,
    entries >= {{ var('leaderboard_min_entries') }} AS qualified,
    {{ var('leaderboard_min_entries') }} AS min_entries,
    CASE WHEN entries >= {{ var('leaderboard_min_entries') }} THEN
        rank() OVER (PARTITION BY period, period_start, entries >= {{ var('leaderboard_min_entries') }} ORDER BY profit_usd DESC NULLS LAST)
    END AS rank_by_profit,
    CASE WHEN entries >= {{ var('leaderboard_min_entries') }} THEN
        rank() OVER (PARTITION BY period, period_start, entries >= {{ var('leaderboard_min_entries') }} ORDER BY total_roi_pct DESC NULLS LAST)
    END AS rank_by_roi,
    CASE WHEN entries >= {{ var('leaderboard_min_entries') }} THEN
        rank() OVER (PARTITION BY period, period_start, entries >= {{ var('leaderboard_min_entries') }} ORDER BY entries DESC)
    END AS rank_by_entries,
    buy_ins_usd,
    abi_usd,
    profit_usd,
    total_roi_pct,
    avg_roi_pct,
    roi_ci_low_pct,
    roi_ci_high_pct,
    roi_sample_too_small,
    itm_pct,
    wins
FROM {{ ref('player_results_by_period') }}
