-- Statement templates for every warehouse table, rendered by tourneylake.tables.warehouse from the table
-- catalogue (tourneylake/schemas.py): @table is the table's quoted name, @columns its
-- column definitions, @key its key columns, @key_match their equality between t (the table) and s
-- (the night's rows). Only identifiers from the catalogue are substituted (checked and quoted);
-- values are always bound parameters ($files: the night's Parquet parts, $snapshot_date).

-- name: create
CREATE TABLE IF NOT EXISTS @table (
@columns
);

-- name: add_column
ALTER TABLE @table ADD COLUMN IF NOT EXISTS @column;

-- name: count_rows
SELECT count(*) FROM @table;

-- The night's parts into a table, as they are (every load below ends with it, or merges).
-- name: insert
INSERT INTO @table BY NAME
SELECT * FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true);

-- Snapshot tables keep every night: the night's rows are replaced (delete-then-insert). So is each
-- changed night of a whole table (the ledger: a reconciliation books a dead run's charges into its
-- own night, so an earlier night may change).
-- name: snapshot_delete
DELETE FROM @table WHERE snapshot_date = $snapshot_date;

-- Reference tables hold the latest snapshot only (delete_all, then insert); an older night never
-- replaces a newer one.
-- name: reference_is_latest
SELECT coalesce(max(snapshot_date) <= $snapshot_date, true) FROM @table;

-- name: delete_all
DELETE FROM @table;

-- Deduplicated tables keep one row per key across nights: the latest snapshot wins (the service's
-- latest word on a tournament or an entry; every earlier answer stays in the lake), an older
-- night never overwrites a newer row, and loading a night twice changes nothing. The models convert
-- an entry's money at the rates of the night its tournament started in, not at the listing night's
-- (`player_results_usd`): a later listing moves a finished night's USD only where the service
-- changed the entry itself. A night's
-- partition holds each key once (the lake keeps one row per key: night_one_per_key), which the
-- key columns alone confirm, cheaply; only a partition that breaks that is merged through
-- dedup_insert_new_first (a window over the whole rows costs ~3x the check).
-- name: dedup_repeated_keys
SELECT count(*)
FROM (
    SELECT @key
    FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true)
    GROUP BY ALL
    HAVING count(*) > 1
);

-- An empty table (a new warehouse's first night, the first night of `rebuild --all`) takes the
-- night as it is (insert), without looking for keys it cannot hold.
-- name: dedup_is_empty
SELECT NOT EXISTS (SELECT 1 FROM @table);

-- A night merged in two statements: the rows it lists again are replaced (deleted, unless the
-- table's row is from a later night), then every row whose key the table lacks now is inserted
-- (DuckDB's MERGE updates each matched row column by column, many times slower).
-- name: dedup_replace
DELETE FROM @table AS t
USING read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true) AS s
WHERE @key_match AND s.snapshot_date >= t.snapshot_date;

-- name: dedup_insert_new
INSERT INTO @table BY NAME
SELECT s.*
FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true) AS s
WHERE NOT EXISTS (SELECT 1 FROM @table AS t WHERE @key_match);

-- Of the rows a night's parts hold for one key (answers of the night that listed a tournament
-- differently, or shards that each wrote theirs), the one kept is chosen by content: @rank
-- (the latest listing: `listed_at`, the server time of the answer it was read from), then the
-- row's own values as text (in UTC): never the order in which processes read the answers, so a
-- harvest, a rebuild and any interleaving of shards keep the same row. The rows it replaces go
-- first, as above (dedup_replace).
-- name: dedup_insert_new_first
INSERT INTO @table BY NAME
SELECT *
FROM (
    SELECT *
    FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true) AS s
    QUALIFY row_number() OVER (PARTITION BY @key ORDER BY @rank CAST(s AS VARCHAR)) = 1
) AS s
WHERE NOT EXISTS (SELECT 1 FROM @table AS t WHERE @key_match);

-- The same choice in the lake: a night's rows, one per key (what the lake's partition keeps).
-- name: night_one_per_key
SELECT *
FROM read_parquet($files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true) AS s
QUALIFY row_number() OVER (PARTITION BY @key ORDER BY @rank CAST(s AS VARCHAR)) = 1;

-- The same choice over a night's parts made by shards: the rows it does not keep, as (part, row
-- number), so each shard's parts lose only those. A row's text leaves out where it was read
-- (the same text as above); of identical rows, the one in the first part is kept.
-- name: night_rows_not_kept
SELECT part_, row_
FROM (
    SELECT r.filename AS part_, r.file_row_number AS row_, CAST(c AS VARCHAR) AS text_, c.*
    FROM read_parquet(
        $files, hive_partitioning = true, hive_types = {'snapshot_date': DATE}, union_by_name = true,
        filename = true, file_row_number = true
    ) AS r,
    LATERAL (SELECT r.* EXCLUDE (filename, file_row_number)) AS c
) AS s
QUALIFY row_number() OVER (PARTITION BY @key ORDER BY @rank text_, part_, row_) > 1;

-- A relation (a view, say) as the catalog shows it: its rows and its columns. Bound by name.
-- name: relation_rows
SELECT count(*) FROM query_table($name);

-- name: relation_columns
SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $name ORDER BY ordinal_position;

-- The night's rows of a snapshot table (checked against the rows the lake gave the load).
-- name: night_rows
SELECT count(*) FROM @table WHERE snapshot_date = $snapshot_date;

-- What each load read from the lake, so the next one reads only what changed: for every table and
-- night, the Delta parts (their paths) loaded last. Kept apart from the analysts' tables (a schema
-- of its own), in the same transaction as the load.
-- name: loads_create
CREATE SCHEMA IF NOT EXISTS tourneylake_meta;
CREATE TABLE IF NOT EXISTS tourneylake_meta.lake_loads (
    table_name VARCHAR NOT NULL,
    snapshot_date DATE NOT NULL,
    parts VARCHAR NOT NULL,
    loaded_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (table_name, snapshot_date)
);

-- Read once a load, written once a load (its tables' nights, each a statement, cost a DuckDB
-- statement's overhead each): bound as a list of (table_name, snapshot_date[, parts]) structs.
-- name: loads_all
SELECT table_name, snapshot_date, parts FROM tourneylake_meta.lake_loads;

-- name: loads_record
INSERT OR REPLACE INTO tourneylake_meta.lake_loads
SELECT l.table_name, l.snapshot_date, l.parts, now() FROM (SELECT unnest($loads) AS l);

-- name: loads_forget
DELETE FROM tourneylake_meta.lake_loads
WHERE (table_name, snapshot_date) IN (SELECT (l.table_name, l.snapshot_date) FROM (SELECT unnest($loads) AS l));

-- A night's rows in the lake when its commit did not say them (Parquet footers only).
-- name: count_parts
SELECT count(*) FROM read_parquet($files);
