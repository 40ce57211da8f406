{#- Every row of a table or model belongs to a row of `to` with the same values of `columns`
    (a key of several columns: dbt's own `relationships` test takes one): the rows returned are
    those whose key `to` lacks. Keyed by `snapshot_date`, the latest nights are checked
    (`nights_tested`), against the same nights of `to`. -#}
{% test belongs_to(model, columns, to) %}
SELECT {{ columns | join(', ') }}
FROM {{ model }} AS child
WHERE NOT EXISTS (
    SELECT 1 FROM {{ to }} AS parent
    WHERE {% for column in columns %}parent.{{ column }} = child.{{ column }}{% if not loop.last %} AND {% endif %}{% endfor %}
    {%- if 'snapshot_date' in columns %}
        AND {{ nights_tested(model, 'parent.snapshot_date') }}
    {%- endif %}
)
{%- if 'snapshot_date' in columns %}
    AND {{ nights_tested(model, 'child.snapshot_date') }}
{%- endif %}
{% endtest %}
