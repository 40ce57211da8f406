{#- The first night an incremental model keyed by `snapshot_date` builds again (as 'YYYY-MM-DD'):
    the earliest night of its source `tables` whose parts the warehouse loaded since the model
    last recorded them (`record_inputs`, its post-hook): a night loaded again, drained, rebuilt in
    place or caught up late. '9999-12-31' when none changed (the build adds nothing), '1900-01-01'
    when the model recorded none (every night made again). The warehouse's load keeps each night's
    parts in `tourneylake_meta.lake_loads`, so this compares a few hundred digests and reads no
    row of the tables. Run at compile time: the model then reads those nights by a fixed date,
    which DuckDB prunes to their row groups. Such a model's `unique_key` is the one column
    'snapshot_date', a string: dbt-duckdb then deletes the nights made again with `IN` (given as
    a list, it joins every held row of a night to every new row of it). -#}
{% macro first_night_to_build(tables) -%}
{%- if not execute or not tourneylake_meta_held() -%}
    {{- return('1900-01-01') -}}
{%- endif -%}
{%- set query %}
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM tourneylake_meta.model_inputs WHERE model = '{{ this.identifier }}') THEN '1900-01-01'
        ELSE coalesce(strftime(min(snapshot_date), '%Y-%m-%d'), '9999-12-31')
    END
    FROM ({{ nights_changed(tables) }})
{%- endset %}
{{- return(run_query(query).columns[0].values()[0]) }}
{%- endmacro %}

{#- The nights of `tables` whose parts the warehouse loaded since the model last recorded them
    (a query of one `snapshot_date` column): the load's record against the model's. -#}
{% macro nights_changed(tables) -%}
    SELECT snapshot_date
    FROM (
        SELECT table_name, snapshot_date, parts FROM tourneylake_meta.lake_loads WHERE table_name IN {{ sql_list(tables) }}
    ) AS loaded
    FULL JOIN (
        SELECT table_name, snapshot_date, parts FROM tourneylake_meta.model_inputs
        WHERE model = '{{ this.identifier }}' AND table_name IN {{ sql_list(tables) }}
    ) AS built USING (table_name, snapshot_date)
    WHERE loaded.parts IS DISTINCT FROM built.parts
{%- endmacro %}

{#- The pre-hook of an incremental model keyed by `snapshot_date`: its rows of the nights it makes
    again deleted first (in the build's transaction), so a night that now gives no row keeps none. -#}
{% macro delete_nights_from(since) -%}
{%- if is_incremental() -%}
    DELETE FROM {{ this }} WHERE snapshot_date >= DATE '{{ since }}'
{%- else -%}
    SELECT 1
{%- endif -%}
{%- endmacro %}

{#- The post-hook of a model built by `first_night_to_build`: the parts of its source `tables`
    it was made from, as the warehouse's load recorded them, in the build's transaction. -#}
{% macro record_inputs(tables) -%}
{%- if tourneylake_meta_held() -%}
    DELETE FROM tourneylake_meta.model_inputs WHERE model = '{{ this.identifier }}';
    INSERT INTO tourneylake_meta.model_inputs
    SELECT '{{ this.identifier }}', table_name, snapshot_date, parts
    FROM tourneylake_meta.lake_loads
    WHERE table_name IN {{ sql_list(tables) }}
{%- else -%}
    SELECT 1
{%- endif -%}
{%- endmacro %}

{#- Whether the warehouse holds the load's record of the parts it read (`tourneylake_meta.lake_loads`,
    made by the warehouse's load) and the models' record `beside` it: else every build makes every
    night again. -#}
{% macro tourneylake_meta_held(beside='model_inputs') -%}
{%- if not execute -%}
    {{- return(false) -}}
{%- endif -%}
{%- set held = run_query(
    "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'tourneylake_meta' AND table_name IN ('lake_loads', '" ~ beside ~ "')"
).columns[0].values()[0] -%}
{{- return(held == 2) -}}
{%- endmacro %}

{#- The models' record of the parts each incremental model was last made from (`record_inputs`),
    of the entries' digests (`record_entry_days`) and of the load each relation's tests last all
    passed on (`record_relations_tested`), made at the start of every dbt run
    (`on-run-start`) beside the load's. -#}
{% macro model_inputs_create() -%}
    CREATE SCHEMA IF NOT EXISTS tourneylake_meta;
    CREATE TABLE IF NOT EXISTS tourneylake_meta.model_inputs (
        model VARCHAR NOT NULL,
        table_name VARCHAR NOT NULL,
        snapshot_date DATE NOT NULL,
        parts VARCHAR NOT NULL
    );
    CREATE TABLE IF NOT EXISTS tourneylake_meta.model_entry_days (
        model VARCHAR NOT NULL,
        network VARCHAR NOT NULL,
        player VARCHAR NOT NULL,
        day DATE NOT NULL,
        digest UBIGINT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS tourneylake_meta.relations_tested (
        relation VARCHAR PRIMARY KEY,
        loaded_at TIMESTAMPTZ NOT NULL
    )
{%- endmacro %}

{% macro sql_list(values) -%}
({% for value in values %}'{{ value }}'{{ ', ' if not loop.last }}{% endfor %})
{%- endmacro %}

{#- The configuration of an incremental model keyed by `snapshot_date` and made from `tables`:
    the nights from `first_night_to_build` on deleted and made again, the parts recorded after. -#}
{% macro incremental_by_night(tables) -%}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='snapshot_date',
    on_schema_change='fail',
    pre_hook="{{ delete_nights_from(first_night_to_build(" ~ tables ~ ")) }}",
    post_hook="{{ record_inputs(" ~ tables ~ ") }}"
) }}
{%- endmacro %}

{#- Each player's entries digested by UTC day (of `player_entries`, the values a window sums):
    what `computed_vs_served` was made from, by content. The service lists a player's entries
    again every night, so the night that listed an entry says nothing of whether it changed. -#}
{% macro entry_days() -%}
    SELECT
        network,
        player,
        day,
        bit_xor(hash(tournament_id, started_at, profit_usd, buy_in_usd, roi_pct, cashed, usd_rate_of_another_night, usd_rate_missing)) AS digest
    FROM {{ ref('player_entries') }}
    WHERE started_at IS NOT NULL
    GROUP BY network, player, day
{%- endmacro %}

{#- The players whose entries changed since the model recorded them (`record_entry_days`), each
    with the first day that changed (`since`): an entry listed, changed or gone. -#}
{% macro entry_days_changed() -%}
    SELECT
        coalesce(now.network, was.network) AS network,
        coalesce(now.player, was.player) AS player,
        min(coalesce(now.day, was.day)) AS since
    FROM ({{ entry_days() }}) AS now
    FULL JOIN (
        SELECT network, player, day, digest FROM tourneylake_meta.model_entry_days WHERE model = '{{ this.identifier }}'
    ) AS was ON now.network = was.network AND now.player = was.player AND now.day = was.day
    WHERE now.digest IS DISTINCT FROM was.digest
    GROUP BY 1, 2
{%- endmacro %}

{#- The post-hook of a model built by `entry_days_changed`: its entries' digests, in the build's
    transaction. -#}
{% macro record_entry_days() -%}
{%- if tourneylake_meta_held() -%}
    DELETE FROM tourneylake_meta.model_entry_days WHERE model = '{{ this.identifier }}';
    INSERT INTO tourneylake_meta.model_entry_days SELECT '{{ this.identifier }}', network, player, day, digest FROM ({{ entry_days() }})
{%- else -%}
    SELECT 1
{%- endif -%}
{%- endmacro %}
