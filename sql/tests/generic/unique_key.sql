{#- A table or model holds each value of its key (several columns) once: the rows returned are
    the keys found more than once, with how often. -#}
{% test unique_key(model, columns) %}
SELECT {{ columns | join(', ') }}, count(*) AS rows_with_key
FROM {{ model }}
GROUP BY {{ columns | join(', ') }}
HAVING count(*) > 1
{% endtest %}
