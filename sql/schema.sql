-- tourneylake warehouse DDL (DuckDB). Mirrors tourneylake/normalize/schemas.py: one table per
-- lake table, UTC TIMESTAMPTZ times, a _usd column beside every money column.
-- No PRIMARY KEYs: uniqueness of the keys below is enforced by the load statements in sql/load/
-- (delete-then-insert per night, or MERGE on the key), which keeps bulk loads at read_parquet speed.
SET TimeZone = 'UTC';

-- currencies: Currencies of the metadata snapshot, with the USD rates in force that night. Grain: one row per snapshot and currency. Key: (iso). Load: reference.
CREATE TABLE IF NOT EXISTS currencies (
    snapshot_date DATE NOT NULL,
    iso VARCHAR,
    symbol VARCHAR,
    rate DOUBLE,
    rate_known BOOLEAN,
    metadata_hash VARCHAR,
    extra MAP(VARCHAR, VARCHAR)
);

-- networks: Poker networks the service tracks (`Networks/Network`). Grain: one row per snapshot and network. Key: (name). Load: reference.
CREATE TABLE IF NOT EXISTS networks (
    snapshot_date DATE NOT NULL,
    name VARCHAR,
    code VARCHAR,
    region VARCHAR,
    closed BOOLEAN,
    searchable BOOLEAN,
    hud_coverage BOOLEAN,
    coverage_stage VARCHAR,
    full_coverage_start VARCHAR,
    full_coverage_tracking_rate VARCHAR,
    earliest_game_tracked VARCHAR,
    tracked_games_count BIGINT,
    skins STRUCT(id VARCHAR, name VARCHAR, major BOOLEAN)[],
    skin_count INTEGER,
    extra MAP(VARCHAR, VARCHAR)
);

-- regions: Regions of the metadata (`Regions/Region`). Grain: one row per snapshot and region. Key: (code). Load: reference.
CREATE TABLE IF NOT EXISTS regions (
    snapshot_date DATE NOT NULL,
    code VARCHAR,
    name VARCHAR,
    image VARCHAR
);

-- filter_constraints: Filter constraint types (`FilterDefinition/ConstraintDefinition`). Grain: one row per snapshot and constraint. Key: (constraint_id). Load: reference.
CREATE TABLE IF NOT EXISTS filter_constraints (
    snapshot_date DATE NOT NULL,
    constraint_id VARCHAR,
    type VARCHAR,
    option_count INTEGER
);

-- filter_options: Allowed values of the multiselect filter constraints (`ConstraintDefinition/Option`). Grain: one row per snapshot, constraint and option. Key: (constraint_id, option_id). Load: reference.
CREATE TABLE IF NOT EXISTS filter_options (
    snapshot_date DATE NOT NULL,
    constraint_id VARCHAR,
    option_id VARCHAR,
    name VARCHAR,
    type VARCHAR,
    description VARCHAR,
    children VARCHAR[]
);

-- statistic_definitions: Player and tournament statistic definitions (`*StatisticDefinition`). Grain: one row per snapshot, scope and statistic. Key: (scope, statistic_id). Load: reference.
CREATE TABLE IF NOT EXISTS statistic_definitions (
    snapshot_date DATE NOT NULL,
    scope VARCHAR,
    statistic_id VARCHAR,
    name VARCHAR,
    type VARCHAR,
    description VARCHAR
);

-- dataset_definitions: Statistical data set series definitions (`*StatisticalDataSetDefinition/Series`). Grain: one row per snapshot, scope, data set and series. Key: (scope, dataset, series). Load: reference.
CREATE TABLE IF NOT EXISTS dataset_definitions (
    snapshot_date DATE NOT NULL,
    scope VARCHAR,
    dataset VARCHAR,
    x_axis_title VARCHAR,
    x_axis_type VARCHAR,
    z_axis_title VARCHAR,
    z_axis_type VARCHAR,
    series VARCHAR,
    series_title VARCHAR,
    type VARCHAR
);

-- countries: Countries the service recognises (`/metadata/countries`, shape read generically). Grain: one row per snapshot and country. Key: (code). Load: reference.
CREATE TABLE IF NOT EXISTS countries (
    snapshot_date DATE NOT NULL,
    code VARCHAR,
    name VARCHAR,
    attributes MAP(VARCHAR, VARCHAR),
    raw_json VARCHAR
);

-- news: Product news (`/news/whatsnew`, shape read generically). Grain: one row per snapshot and news item. Key: (item_index). Load: reference.
CREATE TABLE IF NOT EXISTS news (
    snapshot_date DATE NOT NULL,
    item_index INTEGER,
    news_id VARCHAR,
    title VARCHAR,
    published_at TIMESTAMPTZ,
    url VARCHAR,
    body VARCHAR,
    attributes MAP(VARCHAR, VARCHAR),
    raw_json VARCHAR
);

-- player_snapshots: One harvested player summary (`PlayerResponse/PlayerView/Player`). Grain: one row per snapshot, network, player and filter. Key: (network, player, filter_name). Load: snapshot.
CREATE TABLE IF NOT EXISTS player_snapshots (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    player VARCHAR,
    filter_name VARCHAR,
    filter_expression VARCHAR,
    served_filter VARCHAR,
    served_name VARCHAR,
    found BOOLEAN,
    country VARCHAR,
    country_name VARCHAR,
    last_activity_at TIMESTAMPTZ,
    display_currency VARCHAR,
    display_usd_rate DOUBLE,
    statistic_count INTEGER,
    tournament_count INTEGER,
    server_time TIMESTAMPTZ,
    metadata_hash VARCHAR,
    fetched_at TIMESTAMPTZ
);

-- player_statistics: Player statistics in long form (`Statistics/Statistic`); ids are open-ended. Grain: one row per snapshot, network, player, filter and statistic. Key: (network, player, filter_name, statistic). Load: snapshot.
CREATE TABLE IF NOT EXISTS player_statistics (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    player VARCHAR,
    filter_name VARCHAR,
    statistic VARCHAR,
    type VARCHAR,
    value VARCHAR,
    value_number DOUBLE,
    value_time TIMESTAMPTZ,
    value_usd DOUBLE,
    display_currency VARCHAR,
    authorized BOOLEAN,
    usd_rate_missing BOOLEAN
);

-- player_datasets: Statistical data sets in long form (`StatisticalDataSet/Data/Y`). Grain: one row per snapshot, network, player, filter, data set, x (and z) and series. Key: (network, player, filter_name, dataset, x, z, series). Load: snapshot.
CREATE TABLE IF NOT EXISTS player_datasets (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    player VARCHAR,
    filter_name VARCHAR,
    dataset VARCHAR,
    x VARCHAR,
    z VARCHAR,
    series VARCHAR,
    type VARCHAR,
    value VARCHAR,
    value_number DOUBLE,
    value_usd DOUBLE,
    display_currency VARCHAR,
    usd_rate_missing BOOLEAN
);

-- player_timeline: Timeline events of a summary (`Statistics/Timeline/Event`): achievements and prizes. Grain: one row per snapshot, network, player, filter and event. Key: (network, player, filter_name, event_id). Load: snapshot.
CREATE TABLE IF NOT EXISTS player_timeline (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    player VARCHAR,
    filter_name VARCHAR,
    event_id VARCHAR,
    category VARCHAR,
    event_at TIMESTAMPTZ,
    code VARCHAR,
    name VARCHAR,
    description VARCHAR,
    points INTEGER,
    priority INTEGER,
    is_negative BOOLEAN,
    game_id VARCHAR,
    tournament_name VARCHAR,
    position INTEGER,
    entrants INTEGER,
    currency VARCHAR,
    prize DOUBLE,
    prize_usd DOUBLE,
    usd_rate_missing BOOLEAN,
    url VARCHAR,
    attributes MAP(VARCHAR, VARCHAR)
);

-- tournaments: Tournaments seen in recent-tournament lists (`RecentTournaments/Tournament`). Grain: one row per network and tournament id (latest snapshot wins). Key: (network, tournament_id). Load: dedup.
CREATE TABLE IF NOT EXISTS tournaments (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    tournament_id VARCHAR,
    name VARCHAR,
    started_at TIMESTAMPTZ,
    duration_s BIGINT,
    currency VARCHAR,
    stake DOUBLE,
    stake_usd DOUBLE,
    rake DOUBLE,
    rake_usd DOUBLE,
    buy_in DOUBLE,
    buy_in_usd DOUBLE,
    prize_pool DOUBLE,
    prize_pool_usd DOUBLE,
    guarantee DOUBLE,
    guarantee_usd DOUBLE,
    overlay DOUBLE,
    overlay_usd DOUBLE,
    re_entries INTEGER,
    total_entrants INTEGER,
    players_per_table INTEGER,
    game VARCHAR,
    game_class VARCHAR,
    structure VARCHAR,
    flags VARCHAR[],
    state VARCHAR,
    usd_rate DOUBLE,
    usd_rate_missing BOOLEAN,
    extra MAP(VARCHAR, VARCHAR)
);

-- tournament_entries: A watched player's result in a tournament (`Tournament/TournamentEntry`). Grain: one row per network, tournament id and player (latest snapshot wins). Key: (network, tournament_id, player). Load: dedup.
CREATE TABLE IF NOT EXISTS tournament_entries (
    snapshot_date DATE NOT NULL,
    network VARCHAR,
    tournament_id VARCHAR,
    player VARCHAR,
    position INTEGER,
    cashed BOOLEAN,
    prize DOUBLE,
    prize_usd DOUBLE,
    multientries INTEGER,
    currency VARCHAR,
    stake DOUBLE,
    rake DOUBLE,
    profit DOUBLE,
    profit_usd DOUBLE,
    usd_rate DOUBLE,
    usd_rate_missing BOOLEAN
);

-- search_ledger: Every call made to the service, metered or free, written by the harvester (`tourneylake.ledger`). Grain: one row per call attempt. Key: (run_id, called_at, resource, network, player, filter_name, attempt). Load: snapshot.
CREATE TABLE IF NOT EXISTS search_ledger (
    snapshot_date DATE NOT NULL,
    called_at TIMESTAMPTZ,
    run_id VARCHAR,
    resource VARCHAR,
    network VARCHAR,
    player VARCHAR,
    filter_name VARCHAR,
    filter_expression VARCHAR,
    question VARCHAR,
    attempt INTEGER,
    cost INTEGER,
    remaining_before BIGINT,
    remaining_after BIGINT,
    outcome VARCHAR,
    error_code BIGINT,
    error VARCHAR,
    http_status INTEGER,
    duration_ms DOUBLE
);
