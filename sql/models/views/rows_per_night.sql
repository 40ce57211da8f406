-- How many rows each warehouse table holds for each night (`snapshot_date`): a night missing from a
-- table, or thinner than the others, shows here. Every table is read, so every table's tests run
-- with the models (and show as checks on it).
{%- set tables = [
    'currencies',
    'networks',
    'regions',
    'filter_constraints',
    'filter_options',
    'statistic_definitions',
    'dataset_definitions',
    'countries',
    'news',
    'player_snapshots',
    'player_statistics',
    'player_datasets',
    'player_timeline',
    'tournaments',
    'tournament_entries',
    'coverage_changes',
    'search_ledger'
] %}
{% for table in tables %}
SELECT '{{ table }}' AS table_name, snapshot_date AS night, count(*) AS table_rows
FROM {{ source('warehouse', table) }}
GROUP BY snapshot_date
{% if not loop.last %}UNION ALL{% endif %}
{% endfor %}
