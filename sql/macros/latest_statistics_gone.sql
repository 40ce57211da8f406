{#- The post-hook of `latest_player_statistics`: its rows of the nights the build made again
    (`first_night_to_build` on) that those nights no longer hold (a night rebuilt in place without
    a statistic that has no older row): deleted, in the build's transaction. -#}
{% macro latest_statistics_gone() -%}
{%- set since = first_night_to_build(['player_statistics']) if is_incremental() else '9999-12-31' -%}
{%- if since != '9999-12-31' -%}
    DELETE FROM {{ this }} AS t
    WHERE t.snapshot_date >= DATE '{{ since }}'
    AND NOT EXISTS (
        SELECT 1
        FROM {{ source('warehouse', 'player_statistics') }} AS s
        WHERE s.snapshot_date >= DATE '{{ since }}' AND s.snapshot_date = t.snapshot_date AND s.network = t.network
            AND s.player = t.player AND s.filter_name = t.filter_name AND s.statistic = t.statistic
    )
{%- else -%}
    SELECT 1
{%- endif -%}
{%- endmacro %}
