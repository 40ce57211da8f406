-- The coaches' measures per player and period: each UTC day, ISO week and month an entry
-- started in, and every night held (`all`).
WITH periods AS (
    SELECT e.*, {{ period_columns('e.day') }}
    FROM {{ ref('player_entries') }} AS e
    {{ periods() }}
)
SELECT
    network,
    player,
    period,
    period_start,
    {{ entry_metrics() }}
FROM periods
GROUP BY network, player, period, period_start
