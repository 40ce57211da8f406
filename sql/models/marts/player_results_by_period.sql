-- The coaches' measures per player and period (calendar periods, every night held and the
-- rolling windows: the macro periods()), with the days won and lost and the longest run of each.
-- A table, made again at every build (its rolling windows end at the latest night): the
-- leaderboard, the comparison, the report and the notebooks read it, some twice in one query.
{{ config(materialized='table') }}
WITH entry_periods AS (
    SELECT e.*, {{ period_columns('e.day') }}
    FROM {{ ref('player_entries') }} AS e
    {{ periods('e.day') }}
),
measures AS (
    SELECT network, player, period, period_start, {{ entry_metrics() }}
    FROM entry_periods
    GROUP BY network, player, period, period_start
),
day_periods AS (
    SELECT d.network, d.player, d.day_result, d.run_started_on, {{ period_columns('d.day') }}
    FROM {{ ref('player_days') }} AS d
    {{ periods('d.day') }}
),
run_days AS (  -- the period's days played in a row with one result: a run of the player's days, cut at the period's bounds
    SELECT network, player, period, period_start, day_result, count(*) AS days
    FROM day_periods
    GROUP BY network, player, period, period_start, day_result, run_started_on
),
days AS (
    SELECT
        network,
        player,
        period,
        period_start,
        sum(days) FILTER (WHERE day_result = 'won') AS winning_days,
        sum(days) FILTER (WHERE day_result = 'lost') AS losing_days,
        sum(days) FILTER (WHERE day_result = 'even') AS break_even_days,
        max(days) FILTER (WHERE day_result = 'won') AS longest_winning_run_days,
        max(days) FILTER (WHERE day_result = 'lost') AS longest_losing_run_days
    FROM run_days
    GROUP BY network, player, period, period_start
)
SELECT
    m.*,
    coalesce(d.winning_days, 0)::BIGINT AS winning_days,
    coalesce(d.losing_days, 0)::BIGINT AS losing_days,
    coalesce(d.break_even_days, 0)::BIGINT AS break_even_days,
    coalesce(d.longest_winning_run_days, 0)::BIGINT AS longest_winning_run_days,
    coalesce(d.longest_losing_run_days, 0)::BIGINT AS longest_losing_run_days
FROM measures AS m
LEFT JOIN days AS d
    ON d.network = m.network AND d.player = m.player AND d.period = m.period
    AND d.period_start IS NOT DISTINCT FROM m.period_start
