{#- The first night an incremental model keyed by `snapshot_date` builds again (as 'YYYY-MM-DD'):
    the latest night it holds (loaded again, it may have gained rows), or an earlier night whose
    rows changed in number since it was built (a drain, a rebuild in place, a night caught up
    late); '1900-01-01' when it holds none. `loaded` is a query of the rows a night should give,
    one `snapshot_date` column per row. Run at compile time: the model then reads those nights by
    a fixed date, which DuckDB prunes to their row groups. Such a model's `unique_key` is the one
    column 'snapshot_date', a string: dbt-duckdb then deletes the nights made again with `IN`
    (given as a list, it joins every held row of a night to every new row of it). -#}
{% macro first_night_to_build(loaded) -%}
{%- set query %}
    WITH held AS (SELECT snapshot_date, count(*) AS held FROM {{ this }} GROUP BY ALL),
    loaded AS (SELECT snapshot_date, count(*) AS loaded FROM ({{ loaded }}) GROUP BY ALL),
    changed AS (
        SELECT min(snapshot_date) AS night
        FROM loaded FULL JOIN held USING (snapshot_date)
        WHERE loaded IS DISTINCT FROM held
    )
    SELECT strftime(coalesce(least((SELECT max(snapshot_date) FROM held), (SELECT night FROM changed)), DATE '1900-01-01'), '%Y-%m-%d')
{%- endset %}
{{- return(run_query(query).columns[0].values()[0] if execute else '1900-01-01') }}
{%- endmacro %}
