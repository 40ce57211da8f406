-- The summaries whose results the service withheld: one row per night, player and filter whose
-- result statistics (Count, Profit, Stake, Rake) it served without a value, `authorized="false"`
-- (the player has not opted in to show them, or the account may not see them). The models that
-- sum results leave these out and say how many they left out; they never read them as zero.
-- Incremental: a night's rows are its own (`first_night_to_build`).
{{ incremental_by_night(['player_statistics']) }}
{%- set withheld %}
SELECT
    snapshot_date,
    network,
    player,
    filter_name,
    'not_authorized' AS withheld_reason,
    list_sort(list(statistic)) AS statistics_withheld
FROM {{ source('warehouse', 'player_statistics') }}
WHERE NOT authorized
GROUP BY snapshot_date, network, player, filter_name
HAVING count(*) FILTER (WHERE statistic IN ('Count', 'Profit', 'Stake', 'Rake')) > 0
{%- endset %}
{%- set since = first_night_to_build(['player_statistics']) if is_incremental() else '1900-01-01' %}
SELECT * FROM ({{ withheld }}) WHERE snapshot_date >= DATE '{{ since }}'
