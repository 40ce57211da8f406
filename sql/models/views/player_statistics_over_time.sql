-- Every statistic night by night, with the change since the previous harvest. Incremental: a build
-- makes again the nights from `first_night_to_build` on and adds the new ones;
-- each new row's previous harvest is the latest row of its statistic the model holds, looked for
-- in its last `statistics_lookback_nights` nights (a dbt var), and before them only for the
-- statistics not found there. The nights are read by dates fixed before the query runs, so DuckDB
-- reads those nights' row groups alone: a night's build reads the night and the look-back, not the
-- whole history. A full build (`--full-refresh`, a fresh warehouse) reads every night.
{{ incremental_by_night(['player_statistics']) }}
{%- set key = 'network, player, filter_name, statistic' %}
{%- set source_rows = source('warehouse', 'player_statistics') %}

{% if is_incremental() %}
{%- set since = first_night_to_build(['player_statistics']) %}
{%- set lookback = "DATE '" ~ since ~ "' - " ~ var('statistics_lookback_nights') %}
{%- set unmatched_query %}
    SELECT count(*)
    FROM (SELECT DISTINCT {{ key }} FROM {{ source_rows }} WHERE snapshot_date >= DATE '{{ since }}')
    ANTI JOIN (
        SELECT DISTINCT {{ key }} FROM {{ this }} WHERE snapshot_date >= {{ lookback }} AND snapshot_date < DATE '{{ since }}'
    ) USING ({{ key }})
{%- endset %}
{%- set unmatched = run_query(unmatched_query).columns[0].values()[0] if execute else 0 %}
WITH new AS (
    SELECT *
    FROM {{ source_rows }}
    WHERE snapshot_date >= DATE '{{ since }}'
),
{%- if unmatched > 0 %}
unmatched AS (  -- the new nights' statistics not harvested in the look-back's nights (a few)
    SELECT DISTINCT {{ key }} FROM new
    ANTI JOIN (
        SELECT DISTINCT {{ key }} FROM {{ this }} WHERE snapshot_date >= {{ lookback }} AND snapshot_date < DATE '{{ since }}'
    ) USING ({{ key }})
),
{%- endif %}
previous AS (  -- each statistic's latest row held in the look-back's nights
    SELECT {{ key }}, arg_max({'night': snapshot_date, 'number': value_number, 'usd': value_usd}, snapshot_date) AS last
    FROM {{ this }}
    WHERE snapshot_date >= {{ lookback }} AND snapshot_date < DATE '{{ since }}'
    GROUP BY ALL
    {%- if unmatched > 0 %}
    UNION ALL  -- the new nights' statistics not harvested in those nights: their latest older row
    SELECT h.network, h.player, h.filter_name, h.statistic,
        arg_max({'night': h.snapshot_date, 'number': h.value_number, 'usd': h.value_usd}, h.snapshot_date)
    FROM {{ this }} AS h
    SEMI JOIN unmatched USING ({{ key }})  -- a scan of the older nights' keys, joined to those few
    WHERE h.snapshot_date < {{ lookback }}
    GROUP BY ALL
    {%- endif %}
),
rows AS (  -- the new nights' rows, and before them each statistic's latest row held
    SELECT snapshot_date, {{ key }}, type, value, value_number, value_usd, value_time, true AS is_new
    FROM new
    UNION ALL
    SELECT last.night, {{ key }}, NULL, NULL, last.number, last.usd, NULL, false
    FROM previous
)
{% else %}
WITH rows AS (
    SELECT snapshot_date, {{ key }}, type, value, value_number, value_usd, value_time, true AS is_new
    FROM {{ source_rows }}
)
{% endif %}
SELECT
    snapshot_date,
    network,
    player,
    filter_name,
    statistic,
    type,
    value,
    value_number,
    value_usd,
    value_time,
    change,
    change_usd,
    previous_snapshot_date
FROM (
    SELECT
        *,
        value_number - lag(value_number) OVER w AS change,
        value_usd - lag(value_usd) OVER w AS change_usd,
        lag(snapshot_date) OVER w AS previous_snapshot_date
    FROM rows
    WINDOW w AS (PARTITION BY {{ key }} ORDER BY snapshot_date)
)
WHERE is_new
