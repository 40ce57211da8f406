-- One row per entry (a tournament a watched player played), with what the analyses group and
-- measure: its UTC day, ISO week, month and year, the hour of the week it started (in the
-- `time_zone` var), its buy-in and field size buckets, speed, ROI, and how it finished.
-- A table, made again at every build: every entry mart reads it (a view would join the entries,
-- tournaments and rates again at each read of each of them).
{{ config(materialized='table') }}
WITH speeds AS (  -- the Type options metadata classes as Speed (T Turbo, ST Super Turbo, ...)
    SELECT option_id, name
    FROM {{ source('warehouse', 'filter_options') }}
    WHERE constraint_id = 'Type' AND type = 'Speed'
),
entries AS (
    SELECT
        r.*,
        (r.started_at AT TIME ZONE 'UTC')::DATE AS day,
        r.started_at AT TIME ZONE {{ time_zone() }} AS local_start,
        coalesce(r.prize_usd, 0.0) AS prize_usd_or_0,
        coalesce(
            (SELECT arg_min(s.name, s.option_id) FROM speeds AS s WHERE list_contains(r.flags, s.option_id)), 'Normal'
        ) AS speed,
        greatest(ceil(r.total_entrants * 0.1), 1) AS top_10pct_positions,
        -- a final table is one of several tables: the field is larger than one table's seats
        coalesce(r.total_entrants > r.players_per_table AND r.position <= r.players_per_table, false) AS at_final_table
    FROM {{ ref('player_results_usd') }} AS r
)
SELECT
    network,
    player,
    tournament_id,
    tournament_name,
    started_at,
    day,
    date_trunc('week', day)::DATE AS week,
    date_trunc('month', day)::DATE AS month,
    date_trunc('year', day)::DATE AS year,
    ((isodow(local_start) - 1) * 24 + hour(local_start))::INTEGER AS hour_of_week,
    game,
    game_class,
    structure,
    speed,
    flags,
    total_entrants,
    players_per_table,
    {{ field_size_bucket('total_entrants') }}::INTEGER AS field_size_bucket,
    position,
    currency,
    buy_in_usd,
    CASE WHEN buy_in_usd IS NULL THEN NULL ELSE prize_usd_or_0 END AS prize_usd,
    profit_usd,
    100 * profit / nullif(buy_in, 0) AS roi_pct,  -- the same in any currency: needs no rate
    {{ stake_bucket('buy_in_usd') }} AS stake_bucket,
    coalesce(cashed, false) AS cashed,
    coalesce(position = 1, false) AS won,
    at_final_table AS final_table,
    coalesce(position <= top_10pct_positions, false) AS top_10pct,
    CASE
        WHEN position = 1 THEN 'won'
        WHEN at_final_table THEN 'final_table'
        WHEN position <= top_10pct_positions THEN 'top_10pct'
        WHEN cashed THEN 'cashed'
        ELSE 'out'
    END AS finish,
    100.0 * (total_entrants - position) / nullif(total_entrants - 1, 0) AS field_beaten_pct,
    usd_rate_night,
    usd_rate_of_another_night,
    usd_rate_missing,
    snapshot_date
FROM entries
