-- The latest value of every statistic per player and filter (filter_name '' = unfiltered).
-- A table made again at each build: as a view, every read ranked the whole history.
{{ config(materialized='table') }}
SELECT *
FROM {{ source('warehouse', 'player_statistics') }}
QUALIFY row_number() OVER (
    PARTITION BY network, player, filter_name, statistic
    ORDER BY snapshot_date DESC
) = 1
