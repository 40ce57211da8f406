{#- The `time_zone` var (an IANA name, `UTC` by default: the setting TOURNEYLAKE_TIME_ZONE) as a
    SQL string literal: the zone the hour-of-week breakdown reads start times in. -#}
{% macro time_zone() -%}
'{{ var("time_zone") | replace("'", "''") }}'
{%- endmacro %}
