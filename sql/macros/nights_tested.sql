{#- The rows a test of a relation keyed by night reads: its latest `tested_nights` nights (a dbt
    var; 0: every night). A night's rows are checked at every build for that many nights, which
    covers a night loaded again, drained or rebuilt in place; a build's tests then read a week of
    nights, not the history (a full rebuild, `tourneylake rebuild --all`, checks every night).
    `column`: how the test names the relation's night column. -#}
{% macro nights_tested(relation, column='snapshot_date') -%}
{%- set nights = var('tested_nights') | int -%}
{%- if nights > 0 -%}
{{ column }} > (SELECT max(snapshot_date) FROM {{ relation }}) - {{ nights }}
{%- else -%}
true
{%- endif -%}
{%- endmacro %}
