{#- Each row once per period kind, with the period it falls in: `period` ('day', 'week' (ISO, from
    Monday), 'month', 'all') and `period_start` (its first day; NULL for 'all'). `day` is a DATE
    (UTC) expression of the row; the rows are joined to `periods()`. -#}
{% macro period_columns(day) -%}
    p.period,
    CASE p.period
        WHEN 'day' THEN {{ day }}
        WHEN 'week' THEN date_trunc('week', {{ day }})::DATE
        WHEN 'month' THEN date_trunc('month', {{ day }})::DATE
    END AS period_start
{%- endmacro %}

{% macro periods() -%}
CROSS JOIN (VALUES ('day'), ('week'), ('month'), ('all')) AS p(period)
{%- endmacro %}
