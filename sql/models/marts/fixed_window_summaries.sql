-- Each summary whose window is fixed (a `window: day` filter, or an anchored one) and whose filter
-- has no constraint but Date, with its window and what the service served for it (entries, total
-- ROI, average ROI, ITM). `computed_vs_served` sets the lake's entries beside it. Incremental: a
-- night's summaries never change once loaded, so a build makes the nights from
-- `first_night_to_build` on, reading those nights alone.
{{ incremental_by_night(['player_snapshots', 'player_statistics']) }}
{%- set windows_sql %}
    SELECT *
    FROM {{ source('warehouse', 'player_snapshots') }}
    WHERE found AND (filter_window = 'day' OR anchored) AND regexp_matches(filter_sent, '^Date:\d+~\d+$')
{%- endset %}
{%- set since = first_night_to_build(['player_snapshots', 'player_statistics']) if is_incremental() else '1900-01-01' %}
WITH windows AS (
    SELECT
        snapshot_date,
        network,
        player,
        filter_name,
        filter_window,
        tournament_count AS listed,
        to_timestamp(regexp_extract(filter_sent, 'Date:(\d+)~(\d+)', 1)::BIGINT) AS window_start,
        to_timestamp(regexp_extract(filter_sent, 'Date:(\d+)~(\d+)', 2)::BIGINT) AS window_end
    FROM ({{ windows_sql }})
    WHERE snapshot_date >= DATE '{{ since }}'
),
served AS (
    SELECT
        snapshot_date,
        network,
        player,
        filter_name,
        max(value_number) FILTER (WHERE statistic = 'Count') AS served_entries,
        max(value_number) FILTER (WHERE statistic = 'TotalROI') AS served_total_roi_pct,
        max(value_number) FILTER (WHERE statistic = 'AvROI') AS served_avg_roi_pct,
        max(value_number) FILTER (WHERE statistic = 'ITM') AS served_itm_pct
    FROM {{ source('warehouse', 'player_statistics') }}
    WHERE snapshot_date >= DATE '{{ since }}'
    GROUP BY ALL
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
    s.snapshot_date IS NOT NULL AS served,
    s.served_entries::BIGINT AS served_entries,
    s.served_total_roi_pct,
    s.served_avg_roi_pct,
    s.served_itm_pct
FROM windows AS w
LEFT JOIN served AS s USING (snapshot_date, network, player, filter_name)
