{#- The rows a test of a relation keyed by night reads: its latest `tested_nights` nights (a dbt
    var; 0: every night). A night's rows are checked at every build for that many nights, which
    covers a night loaded again, drained or rebuilt in place; a build's tests then read a week of
    nights, not the history (a full rebuild, `tourneylake rebuild --all`, checks every night).
    `column`: how the test names the relation's night column (`snapshot_date`, or `night` in the
    views of the bill). -#}
{% macro nights_tested(relation, column='snapshot_date') -%}
{%- set nights = var('tested_nights') | int -%}
{%- if nights > 0 -%}
{{ column }} > {{ latest_night(relation, column.split('.')[-1]) }} - {{ nights }}
{%- else -%}
true
{%- endif -%}
{%- endmacro %}

{#- The latest night the warehouse holds: the latest its load recorded, given as a date when the
    test is compiled (a scan then reads only the row groups of the nights tested, and a filter on
    a view's night reaches the table under it), else the relation's own latest `column`. -#}
{% macro latest_night(relation, column) -%}
{%- set night = none -%}
{%- if tourneylake_meta_held() -%}
    {%- set night = run_query("SELECT strftime(max(snapshot_date), '%Y-%m-%d') FROM tourneylake_meta.lake_loads").columns[0].values()[0] -%}
{%- endif -%}
{%- if night -%}
DATE '{{ night }}'
{%- else -%}
(SELECT max({{ column }}) FROM {{ relation }})
{%- endif -%}
{%- endmacro %}
