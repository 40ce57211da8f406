{#- A table's or model's key (several columns) names one row: no key value is found twice, and
    no key column is NULL but those in `nullable`. The rows returned are the keys found more than
    once, or with a NULL, with how often. A key holding `snapshot_date` (or `night`) is checked on
    the latest nights (`nights_tested`). -#}
{% test unique_key(model, columns, nullable=[]) %}
SELECT {{ columns | join(', ') }}, count(*) AS rows_with_key
FROM {{ model }}
{%- set night = ['snapshot_date', 'night'] | select('in', columns) | first %}
{%- if night %}
WHERE {{ nights_tested(model, night) }}
{%- endif %}
GROUP BY {{ columns | join(', ') }}
HAVING count(*) > 1
{%- for column in columns if column not in nullable %}
    OR {{ column }} IS NULL
{%- endfor %}
{% endtest %}
