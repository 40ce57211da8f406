{#- The periods results are grouped by, each row joined once to every period it falls in:
    calendar periods (UTC) — `day`, `week` (ISO, from Monday), `month`, `year` — `all` (every night
    held), and rolling windows ending at the latest night the warehouse holds (its last
    `player_snapshots` night, included): `last_7_days`, `last_30_days`, `last_90_days`,
    `last_365_days`. `day` is a DATE (UTC) expression of the row. -#}
{% macro periods(day) -%}
JOIN (
    SELECT v.period, v.window_days, latest.night AS latest_night
    FROM (
        VALUES ('day', NULL), ('week', NULL), ('month', NULL), ('year', NULL), ('all', NULL),
            ('last_7_days', 7), ('last_30_days', 30), ('last_90_days', 90), ('last_365_days', 365)
    ) AS v(period, window_days)
    CROSS JOIN (SELECT max(snapshot_date) AS night FROM {{ source('warehouse', 'player_snapshots') }}) AS latest
) AS p ON p.window_days IS NULL OR {{ day }} BETWEEN p.latest_night - (p.window_days - 1)::INTEGER AND p.latest_night
{%- endmacro %}

{#- The period a row falls in, beside `periods()`: `period` and `period_start`, its first day
    (a rolling window's: the latest night less its days plus one; NULL for `all`). -#}
{% macro period_columns(day) -%}
    p.period,
    CASE p.period
        WHEN 'day' THEN {{ day }}
        WHEN 'week' THEN date_trunc('week', {{ day }})::DATE
        WHEN 'month' THEN date_trunc('month', {{ day }})::DATE
        WHEN 'year' THEN date_trunc('year', {{ day }})::DATE
        WHEN 'all' THEN NULL
        ELSE p.latest_night - (p.window_days - 1)::INTEGER
    END AS period_start
{%- endmacro %}
