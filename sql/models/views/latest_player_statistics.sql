-- The latest value of every statistic per player and filter (filter_name '' = unfiltered).
-- Incremental by statistic: a build reads the nights from `first_night_to_build` on, and a
-- statistic harvested there takes its latest row of them; one whose latest row was in those
-- nights and is there no more (a night rebuilt in place) takes its latest older row, or is
-- dropped by the post-hook when it has none. A night's build reads the night, not the history.
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key=['network', 'player', 'filter_name', 'statistic'],
    on_schema_change='fail',
    post_hook=["{{ latest_statistics_gone() }}", "{{ record_inputs(['player_statistics']) }}"]
) }}
{%- set key = 'network, player, filter_name, statistic' %}
{%- set source_rows = source('warehouse', 'player_statistics') %}
{%- if is_incremental() %}
{%- set since = first_night_to_build(['player_statistics']) %}
{%- set lost_query %}
    SELECT count(*)
    FROM (SELECT {{ key }} FROM {{ this }} WHERE snapshot_date >= DATE '{{ since }}')
    ANTI JOIN (SELECT DISTINCT {{ key }} FROM {{ source_rows }} WHERE snapshot_date >= DATE '{{ since }}') USING ({{ key }})
{%- endset %}
{%- set lost = run_query(lost_query).columns[0].values()[0] if execute else 0 %}
WITH candidates AS (
    SELECT * FROM {{ source_rows }} WHERE snapshot_date >= DATE '{{ since }}'
    {%- if lost > 0 %}
    UNION ALL  -- the statistics whose latest row was in those nights and is there no more
    SELECT s.*
    FROM {{ source_rows }} AS s
    SEMI JOIN (SELECT {{ key }} FROM {{ this }} WHERE snapshot_date >= DATE '{{ since }}') USING ({{ key }})
    WHERE s.snapshot_date < DATE '{{ since }}'
    {%- endif %}
)
{%- else %}
WITH candidates AS (
    SELECT * FROM {{ source_rows }}
)
{%- endif %}
SELECT *
FROM candidates
QUALIFY row_number() OVER (PARTITION BY {{ key }} ORDER BY snapshot_date DESC) = 1
