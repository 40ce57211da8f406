-- Results per player (scope `player`) and over the whole watchlist (scope `watchlist`) broken
-- down by one dimension at a time: stake bucket, game class, structure, speed and network.
WITH dimensions AS (
    SELECT
        e.*,
        d.dimension,
        CASE d.dimension
            WHEN 'stake_bucket' THEN b.stake_bucket_usd
            WHEN 'game_class' THEN coalesce(e.game_class, 'unknown')
            WHEN 'structure' THEN coalesce(e.structure, 'unknown')
            WHEN 'speed' THEN e.speed
            WHEN 'network' THEN e.network
        END AS bucket,
        CASE d.dimension WHEN 'stake_bucket' THEN coalesce(e.stake_bucket, 99) END AS bucket_order
    FROM {{ ref('player_entries') }} AS e
    LEFT JOIN {{ ref('stake_buckets') }} AS b ON b.bucket = e.stake_bucket AND e.buy_in_usd IS NOT NULL
    CROSS JOIN (VALUES ('stake_bucket'), ('game_class'), ('structure'), ('speed'), ('network')) AS d(dimension)
)
SELECT
    CASE WHEN grouping(network, player) = 0 THEN 'player' ELSE 'watchlist' END AS scope,
    network,
    player,
    dimension,
    coalesce(bucket, 'no USD rate') AS bucket,
    bucket_order,
    {{ entry_metrics() }}
FROM dimensions
GROUP BY GROUPING SETS ((network, player, dimension, bucket, bucket_order), (dimension, bucket, bucket_order))
