-- The coaches' measures per player and period: each UTC day, ISO week and month an entry
-- started in, and every night held (`all`).
WITH periods AS (
    SELECT
        e.*,
        p.period,
        CASE p.period WHEN 'day' THEN e.day WHEN 'week' THEN e.week WHEN 'month' THEN e.month END AS period_start
    FROM {{ ref('player_entries') }} AS e
    CROSS JOIN (VALUES ('day'), ('week'), ('month'), ('all')) AS p(period)
)
SELECT
    network,
    player,
    period,
    period_start,
    {{ entry_metrics() }}
FROM periods
GROUP BY network, player, period, period_start
