-- For each summary whose window is fixed (`fixed_window_summaries`, the ones the service served
-- statistics for): the entries, total ROI, average ROI and ITM computed from the lake's entries
-- started in that window, beside what the service reported for it. A total ROI sums USD: it is
-- compared only where every entry was converted at its own night's rates (`usd_at_own_rates`).
-- Each player's entries are summed in start order once; a window's sums are the running sums at
-- its end less those before its start (two as-of joins, exact in DECIMAL), so the build grows
-- with the entries and windows, not their product.
-- Incremental by window: a build makes the windows of the nights from `first_night_to_build` on,
-- and the older windows of each player whose entries changed (their values digested by day, as
-- the model last recorded them: the service lists every entry again each night), from the first
-- that ends on or after the first day changed: an entry listed late changes every window it
-- started in, whichever night holds the window.
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key=['snapshot_date', 'network', 'player', 'filter_name'],
    on_schema_change='fail',
    pre_hook="{{ delete_nights_from(first_night_to_build(['player_snapshots', 'player_statistics'])) }}",
    post_hook=["{{ record_inputs(['player_snapshots', 'player_statistics']) }}", "{{ record_entry_days() }}"]
) }}
{%- if is_incremental() and tourneylake_meta_held() %}
WITH changed AS (  -- each player whose entries changed, from the first day changed
    {{ entry_days_changed() }}
),
windows AS (
    SELECT w.*
    FROM {{ ref('fixed_window_summaries') }} AS w
    LEFT JOIN changed AS c USING (network, player)
    WHERE w.served AND (w.snapshot_date >= DATE '{{ first_night_to_build(['player_snapshots', 'player_statistics']) }}' OR w.window_end >= c.since)
),
{%- else %}
WITH windows AS (
    SELECT * FROM {{ ref('fixed_window_summaries') }} WHERE served
),
{%- endif %}
starts AS (  -- each player's entries summed per start
    SELECT
        network,
        player,
        started_at,
        count(*) AS entries,
        count(profit_usd) AS profits,
        sum(profit_usd::DECIMAL(38, 12)) AS profit,
        count(buy_in_usd) AS buy_ins,
        sum(buy_in_usd::DECIMAL(38, 12)) AS buy_in,
        count(roi_pct) AS rois,
        sum(roi_pct::DECIMAL(38, 12)) AS roi,
        count(*) FILTER (WHERE cashed) AS cashes,
        count(*) FILTER (WHERE usd_rate_of_another_night OR usd_rate_missing) AS not_at_own_rate
    FROM {{ ref('player_entries') }}
    SEMI JOIN (SELECT DISTINCT network, player FROM windows) USING (network, player)
    WHERE started_at IS NOT NULL
    GROUP BY ALL
),
running AS (  -- the sums of the player's entries started up to each start
    SELECT
        network,
        player,
        started_at,
        sum(entries) OVER w AS entries,
        sum(profits) OVER w AS profits,
        sum(coalesce(profit, 0)) OVER w AS profit,
        sum(buy_ins) OVER w AS buy_ins,
        sum(coalesce(buy_in, 0)) OVER w AS buy_in,
        sum(rois) OVER w AS rois,
        sum(coalesce(roi, 0)) OVER w AS roi,
        sum(cashes) OVER w AS cashes,
        sum(not_at_own_rate) OVER w AS not_at_own_rate
    FROM starts
    WINDOW w AS (PARTITION BY network, player ORDER BY started_at ROWS UNBOUNDED PRECEDING)
),
sums AS (  -- the window's entries: the running sums at its end less those before its start
    SELECT
        w.snapshot_date,
        w.network,
        w.player,
        w.filter_name,
        coalesce(e.entries, 0) - coalesce(b.entries, 0) AS entries,
        coalesce(e.profits, 0) - coalesce(b.profits, 0) AS profits,
        coalesce(e.profit, 0) - coalesce(b.profit, 0) AS profit,
        coalesce(e.buy_ins, 0) - coalesce(b.buy_ins, 0) AS buy_ins,
        coalesce(e.buy_in, 0) - coalesce(b.buy_in, 0) AS buy_in,
        coalesce(e.rois, 0) - coalesce(b.rois, 0) AS rois,
        coalesce(e.roi, 0) - coalesce(b.roi, 0) AS roi,
        coalesce(e.cashes, 0) - coalesce(b.cashes, 0) AS cashes,
        coalesce(e.not_at_own_rate, 0) - coalesce(b.not_at_own_rate, 0) AS not_at_own_rate
    FROM windows AS w
    ASOF LEFT JOIN running AS e ON w.network = e.network AND w.player = e.player AND w.window_end >= e.started_at
    ASOF LEFT JOIN running AS b ON w.network = b.network AND w.player = b.player AND w.window_start > b.started_at
),
computed AS (
    SELECT
        snapshot_date,
        network,
        player,
        filter_name,
        entries::BIGINT AS computed_entries,
        CASE WHEN profits > 0 AND buy_ins > 0 THEN 100 * profit::DOUBLE / nullif(buy_in::DOUBLE, 0) END AS computed_total_roi_pct,
        CASE WHEN rois > 0 THEN roi::DOUBLE / rois END AS computed_avg_roi_pct,
        100 * cashes / nullif(entries, 0) AS computed_itm_pct,
        not_at_own_rate = 0 AS usd_at_own_rates
    FROM sums
)
SELECT
    w.snapshot_date,
    w.network,
    w.player,
    w.filter_name,
    w.filter_window,
    w.window_start,
    w.window_end,
    w.listed,
    w.served_entries,
    c.computed_entries,
    coalesce(w.served_entries <= w.listed, false) AS listed_all,
    w.served_total_roi_pct,
    c.computed_total_roi_pct,
    c.usd_at_own_rates,
    w.served_avg_roi_pct,
    c.computed_avg_roi_pct,
    w.served_itm_pct,
    c.computed_itm_pct,
    c.computed_entries - w.served_entries AS entries_difference,
    c.computed_total_roi_pct - w.served_total_roi_pct AS total_roi_difference_pct,
    c.computed_avg_roi_pct - w.served_avg_roi_pct AS avg_roi_difference_pct,
    c.computed_itm_pct - w.served_itm_pct AS itm_difference_pct
FROM windows AS w
JOIN computed AS c USING (snapshot_date, network, player, filter_name)
