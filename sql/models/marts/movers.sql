-- The served statistics that moved since the previous night they were harvested, per player and
-- filter and night, ranked by how much they moved (relative change first). Incremental: a
-- night's rows are its own, so a build makes the nights from `first_night_to_build` on.
{{ incremental_by_night(['player_statistics']) }}
{%- set moves %}
    SELECT * FROM {{ ref('player_statistics_over_time') }} WHERE change IS NOT NULL AND change <> 0
{%- endset %}
{%- set since = first_night_to_build(['player_statistics']) if is_incremental() else '1900-01-01' %}
WITH moved AS (
    SELECT
        snapshot_date,
        previous_snapshot_date,
        network,
        player,
        filter_name,
        statistic,
        type,
        value_number,
        value_number - change AS previous_value_number,
        change,
        change_usd,
        100 * change / nullif(abs(value_number - change), 0) AS change_pct
    FROM ({{ moves }})
    WHERE snapshot_date >= DATE '{{ since }}'
)
SELECT
    *,
    snapshot_date - previous_snapshot_date AS nights_apart,
    row_number() OVER (
        PARTITION BY snapshot_date, network, player, filter_name
        ORDER BY abs(change_pct) DESC NULLS LAST, abs(change) DESC, statistic
    ) AS mover_rank
FROM moved
