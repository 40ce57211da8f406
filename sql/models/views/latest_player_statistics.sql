-- The latest value of every statistic per player and filter (filter_name '' = unfiltered).
SELECT *
FROM {{ source('warehouse', 'player_statistics') }}
QUALIFY row_number() OVER (
    PARTITION BY network, player, filter_name, statistic
    ORDER BY snapshot_date DESC
) = 1
