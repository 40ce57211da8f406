{#- The rows a test of a relation keyed by night reads: the nights the warehouse loaded since every
    test of that relation last passed (`tourneylake_meta.relations_tested`, written by
    `record_relations_tested` at the end of a build), so each night is checked once when it is
    loaded and again whenever it is loaded again, drained or rebuilt in place, and a failing test
    reads its nights again at the next build. A relation never tested so reads its latest
    `tested_nights` nights (a dbt var); 0: every night (`tourneylake rebuild --all`). The nights
    are given as dates when the test is compiled, so a scan reads only their row groups (and a
    filter on a view's night reaches the table under it). `column`: how the test names the
    relation's night column (`snapshot_date`, or `night` in the views of the bill). -#}
{% macro nights_tested(relation, column='snapshot_date') -%}
{%- set nights = var('tested_nights') | int -%}
{%- set loaded = nights_loaded_since_tested(relation) if nights > 0 else none -%}
{%- if nights <= 0 -%}
true
{%- elif loaded is none -%}
{{ column }} > {{ latest_night(relation, column.split('.')[-1]) }} - {{ nights }}
{%- elif loaded | length == 0 -%}
false
{%- else -%}
{{ column }} BETWEEN DATE '{{ loaded | first }}' AND DATE '{{ loaded | last }}'
    AND {{ column }} IN ({% for night in loaded %}DATE '{{ night }}'{{ ', ' if not loop.last }}{% endfor %})
{%- endif -%}
{%- endmacro %}

{#- The nights (sorted 'YYYY-MM-DD' strings) the warehouse loaded since every test of `relation`
    last passed, or none when they never passed (or the warehouse keeps no such record). -#}
{% macro nights_loaded_since_tested(relation) -%}
{%- if not tourneylake_meta_held('relations_tested') -%}
    {{- return(none) -}}
{%- endif -%}
{%- set query %}
    SELECT strftime(l.snapshot_date, '%Y-%m-%d')
    FROM tourneylake_meta.relations_tested AS t
    LEFT JOIN tourneylake_meta.lake_loads AS l ON l.loaded_at > t.loaded_at
    WHERE t.relation = '{{ relation_name(relation) }}'
    GROUP BY ALL
    ORDER BY 1
{%- endset %}
{%- set rows = run_query(query).columns[0].values() -%}
{%- if rows | length == 0 -%}
    {{- return(none) -}}
{%- endif -%}
{{- return(rows | reject('none') | list) }}
{%- endmacro %}

{#- The name a test's relation is recorded by: its table's or view's; '' for a subquery (a test
    with a `where`), which no record names: it reads its latest `tested_nights`. -#}
{% macro relation_name(relation) -%}
{{- return(relation.identifier if relation.identifier is defined and relation.identifier else '') -}}
{%- endmacro %}

{#- The `on-run-end` hook: every relation whose tests all passed in this build is recorded as
    tested up to the warehouse's latest load (`nights_tested`). A relation with a test that failed
    or errored keeps its older record, so its nights are read again at the next build. -#}
{% macro record_relations_tested(results) -%}
{%- set passed = {} -%}
{%- for result in results if result.node.resource_type == 'test' and result.node.test_metadata -%}
    {#- the tested relation, as the test names it: "{{ get_where_subquery(source('warehouse', 'x')) }}" or ref('x') -#}
    {%- set name = modules.re.findall("'([^']+)'", result.node.test_metadata.kwargs.get('model', '')) | last -%}
    {%- if name -%}
        {%- do passed.update({name: passed.get(name, true) and result.status == 'pass'}) -%}
    {%- endif -%}
{%- endfor -%}
{%- set names = [] -%}
{%- for name, ok in passed | dictsort if ok -%}
    {%- do names.append(name) -%}
{%- endfor -%}
{%- if names and tourneylake_meta_held('relations_tested') -%}
    INSERT OR REPLACE INTO tourneylake_meta.relations_tested
    SELECT relation, (SELECT max(loaded_at) FROM tourneylake_meta.lake_loads)
    FROM (VALUES {% for name in names %}('{{ name }}'){{ ', ' if not loop.last }}{% endfor %}) AS v(relation)
    WHERE EXISTS (SELECT 1 FROM tourneylake_meta.lake_loads)
{%- else -%}
    SELECT 1
{%- endif -%}
{%- endmacro %}

{#- The latest night the warehouse holds: the latest its load recorded, given as a date when the
    test is compiled, else the relation's own latest `column`. -#}
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
