-- Named queries used by tourneylake.warehouse.

-- name: table_counts
SELECT 'currencies' AS table_name, count(*) AS row_count FROM currencies
UNION ALL
SELECT 'networks' AS table_name, count(*) AS row_count FROM networks
UNION ALL
SELECT 'regions' AS table_name, count(*) AS row_count FROM regions
UNION ALL
SELECT 'filter_constraints' AS table_name, count(*) AS row_count FROM filter_constraints
UNION ALL
SELECT 'filter_options' AS table_name, count(*) AS row_count FROM filter_options
UNION ALL
SELECT 'statistic_definitions' AS table_name, count(*) AS row_count FROM statistic_definitions
UNION ALL
SELECT 'dataset_definitions' AS table_name, count(*) AS row_count FROM dataset_definitions
UNION ALL
SELECT 'countries' AS table_name, count(*) AS row_count FROM countries
UNION ALL
SELECT 'news' AS table_name, count(*) AS row_count FROM news
UNION ALL
SELECT 'player_snapshots' AS table_name, count(*) AS row_count FROM player_snapshots
UNION ALL
SELECT 'player_statistics' AS table_name, count(*) AS row_count FROM player_statistics
UNION ALL
SELECT 'player_datasets' AS table_name, count(*) AS row_count FROM player_datasets
UNION ALL
SELECT 'player_timeline' AS table_name, count(*) AS row_count FROM player_timeline
UNION ALL
SELECT 'tournaments' AS table_name, count(*) AS row_count FROM tournaments
UNION ALL
SELECT 'tournament_entries' AS table_name, count(*) AS row_count FROM tournament_entries
UNION ALL
SELECT 'search_ledger' AS table_name, count(*) AS row_count FROM search_ledger;
