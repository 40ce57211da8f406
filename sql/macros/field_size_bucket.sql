{#- The field size bucket (see the `field_size_buckets` model) of an entrants expression:
    1 heads-up (2), 2 3–6, 3 7–9, 4 10–18, 5 19–45, 6 46–100, 7 101–180, 8 181–500,
    9 501–1,000, 10 1,001–5,000, 11 more than 5,000; 0 a field of one; NULL unknown. -#}
{% macro field_size_bucket(entrants) -%}
CASE
    WHEN {{ entrants }} IS NULL THEN NULL
    WHEN {{ entrants }} <= 1 THEN 0
    WHEN {{ entrants }} = 2 THEN 1
    WHEN {{ entrants }} <= 6 THEN 2
    WHEN {{ entrants }} <= 9 THEN 3
    WHEN {{ entrants }} <= 18 THEN 4
    WHEN {{ entrants }} <= 45 THEN 5
    WHEN {{ entrants }} <= 100 THEN 6
    WHEN {{ entrants }} <= 180 THEN 7
    WHEN {{ entrants }} <= 500 THEN 8
    WHEN {{ entrants }} <= 1000 THEN 9
    WHEN {{ entrants }} <= 5000 THEN 10
    ELSE 11
END
{%- endmacro %}
