-- Results per player (scope `player`) and over the whole watchlist (scope `watchlist`) broken
-- down by one dimension at a time: stake bucket, game class, structure, speed, network, field
-- size, hour of the week (in the `time_zone` var) and month.
-- A table made again at each build: as a view, every read (and each of its tests) grouped every
-- entry of the year again.
{{ config(materialized='table') }}
WITH dimensions AS (
    SELECT
        e.*,
        d.dimension,
        CASE d.dimension
            WHEN 'stake_bucket' THEN coalesce(b.stake_bucket_usd, 'no USD rate')
            WHEN 'game_class' THEN coalesce(e.game_class, 'unknown')
            WHEN 'structure' THEN coalesce(e.structure, 'unknown')
            WHEN 'speed' THEN e.speed
            WHEN 'network' THEN e.network
            WHEN 'field_size' THEN coalesce(f.field_size, 'unknown')
            WHEN 'hour_of_week' THEN coalesce(
                ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][e.hour_of_week // 24 + 1] || ' ' || lpad((e.hour_of_week % 24)::VARCHAR, 2, '0') || ':00',
                'unknown'
            )
            WHEN 'month' THEN coalesce(strftime(e.month, '%Y-%m'), 'unknown')
        END AS bucket,
        CASE d.dimension
            WHEN 'stake_bucket' THEN coalesce(e.stake_bucket, 99)
            WHEN 'field_size' THEN coalesce(e.field_size_bucket, 99)
            WHEN 'hour_of_week' THEN e.hour_of_week
            WHEN 'month' THEN year(e.month) * 12 + month(e.month) - 1
        END AS bucket_order
    FROM {{ ref('player_entries') }} AS e
    LEFT JOIN {{ ref('stake_buckets') }} AS b ON b.bucket = e.stake_bucket AND e.buy_in_usd IS NOT NULL
    LEFT JOIN {{ ref('field_size_buckets') }} AS f ON f.bucket = e.field_size_bucket
    CROSS JOIN (
        VALUES ('stake_bucket'), ('game_class'), ('structure'), ('speed'), ('network'), ('field_size'), ('hour_of_week'), ('month')
    ) AS d(dimension)
)
SELECT
    CASE WHEN grouping(network, player) = 0 THEN 'player' ELSE 'watchlist' END AS scope,
    network,
    player,
    dimension,
    bucket,
    bucket_order::INTEGER AS bucket_order,
    {{ entry_metrics() }}
FROM dimensions
GROUP BY GROUPING SETS ((network, player, dimension, bucket, bucket_order), (dimension, bucket, bucket_order))
