-- Any two players side by side, period by period (filter on player_a and player_b): their
-- measures, and the difference of their average ROIs with its 95 % interval.
SELECT
    a.period,
    a.period_start,
    a.network AS network_a,
    a.player AS player_a,
    b.network AS network_b,
    b.player AS player_b,
    a.entries AS entries_a,
    b.entries AS entries_b,
    a.abi_usd AS abi_usd_a,
    b.abi_usd AS abi_usd_b,
    a.profit_usd AS profit_usd_a,
    b.profit_usd AS profit_usd_b,
    a.total_roi_pct AS total_roi_pct_a,
    b.total_roi_pct AS total_roi_pct_b,
    a.avg_roi_pct AS avg_roi_pct_a,
    b.avg_roi_pct AS avg_roi_pct_b,
    a.roi_ci_low_pct AS roi_ci_low_pct_a,
    a.roi_ci_high_pct AS roi_ci_high_pct_a,
    b.roi_ci_low_pct AS roi_ci_low_pct_b,
    b.roi_ci_high_pct AS roi_ci_high_pct_b,
    a.itm_pct AS itm_pct_a,
    b.itm_pct AS itm_pct_b,
    a.wins AS wins_a,
    b.wins AS wins_b,
    a.avg_roi_pct - b.avg_roi_pct AS avg_roi_difference_pct,
    a.avg_roi_pct - b.avg_roi_pct - 1.96 * sqrt(a.roi_se_pct ^ 2 + b.roi_se_pct ^ 2) AS avg_roi_difference_ci_low_pct,
    a.avg_roi_pct - b.avg_roi_pct + 1.96 * sqrt(a.roi_se_pct ^ 2 + b.roi_se_pct ^ 2) AS avg_roi_difference_ci_high_pct,
    coalesce(
        a.avg_roi_pct - b.avg_roi_pct - 1.96 * sqrt(a.roi_se_pct ^ 2 + b.roi_se_pct ^ 2) > 0
        OR a.avg_roi_pct - b.avg_roi_pct + 1.96 * sqrt(a.roi_se_pct ^ 2 + b.roi_se_pct ^ 2) < 0,
        false
    ) AS difference_is_clear
FROM {{ ref('player_results_by_period') }} AS a
JOIN {{ ref('player_results_by_period') }} AS b
    ON a.period = b.period
    AND a.period_start IS NOT DISTINCT FROM b.period_start
    AND (a.network, a.player) <> (b.network, b.player)
