{#- The buy-in bucket (see the `stake_buckets` model) of a USD buy-in expression: 0 freeroll,
    1 under $1, 2 $1–5, 3 $5–11, 4 $11–30, 5 $30–100, 6 $100–500, 7 $500 and more. -#}
{% macro stake_bucket(buy_in_usd) -%}
CASE
    WHEN {{ buy_in_usd }} = 0 THEN 0
    WHEN {{ buy_in_usd }} < 1 THEN 1
    WHEN {{ buy_in_usd }} < 5 THEN 2
    WHEN {{ buy_in_usd }} < 11 THEN 3
    WHEN {{ buy_in_usd }} < 30 THEN 4
    WHEN {{ buy_in_usd }} < 100 THEN 5
    WHEN {{ buy_in_usd }} < 500 THEN 6
    ELSE 7
END
{%- endmacro %}
