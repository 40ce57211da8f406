-- For each summary whose window is fixed (a `window: day` filter, or an anchored one) and whose
-- filter has no constraint but Date: the count, total ROI, average ROI and ITM computed from the
-- lake's entries started in that window, beside what the service reported for it.
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
    FROM {{ source('warehouse', 'player_snapshots') }}
    WHERE found
        AND (filter_window = 'day' OR anchored)
        AND regexp_matches(filter_sent, '^Date:\d+~\d+$')
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
    GROUP BY ALL
),
computed AS (
    SELECT
        w.snapshot_date,
        w.network,
        w.player,
        w.filter_name,
        count(e.tournament_id) AS computed_entries,
        100 * sum(e.profit_usd) / nullif(sum(e.buy_in_usd), 0) AS computed_total_roi_pct,
        avg(e.roi_pct) AS computed_avg_roi_pct,
        100 * count(*) FILTER (WHERE e.cashed) / nullif(count(e.tournament_id), 0) AS computed_itm_pct
    FROM windows AS w
    LEFT JOIN {{ ref('player_entries') }} AS e
        ON e.network = w.network AND e.player = w.player AND e.started_at BETWEEN w.window_start AND w.window_end
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
    s.served_entries::BIGINT AS served_entries,
    c.computed_entries,
    coalesce(s.served_entries <= w.listed, false) AS listed_all,
    s.served_total_roi_pct,
    c.computed_total_roi_pct,
    s.served_avg_roi_pct,
    c.computed_avg_roi_pct,
    s.served_itm_pct,
    c.computed_itm_pct,
    c.computed_entries - s.served_entries::BIGINT AS entries_difference,
    c.computed_total_roi_pct - s.served_total_roi_pct AS total_roi_difference_pct,
    c.computed_avg_roi_pct - s.served_avg_roi_pct AS avg_roi_difference_pct,
    c.computed_itm_pct - s.served_itm_pct AS itm_difference_pct
FROM windows AS w
JOIN served AS s USING (snapshot_date, network, player, filter_name)
JOIN computed AS c USING (snapshot_date, network, player, filter_name)
