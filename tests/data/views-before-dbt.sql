-- The views as sql/views.sql held them before they became dbt models (sql/models/views/): kept
-- for tests/tables/test_models.py, which proves the models give the same rows (EXCEPT ALL both ways).

-- The latest value of every statistic per player and filter (filter_name '' = unfiltered).
CREATE OR REPLACE VIEW latest_player_statistics AS
SELECT *
FROM player_statistics
QUALIFY row_number() OVER (
    PARTITION BY network, player, filter_name, statistic
    ORDER BY snapshot_date DESC
) = 1;

-- Every statistic night by night, with the change since the previous harvest.
CREATE OR REPLACE VIEW player_statistics_over_time AS
SELECT
    snapshot_date,
    network,
    player,
    filter_name,
    statistic,
    type,
    value,
    value_number,
    value_usd,
    value_time,
    value_number - lag(value_number) OVER w AS change,
    value_usd - lag(value_usd) OVER w AS change_usd,
    lag(snapshot_date) OVER w AS previous_snapshot_date
FROM player_statistics
WINDOW w AS (PARTITION BY network, player, filter_name, statistic ORDER BY snapshot_date);

-- Each watched player's results, with the tournament and the profit in USD.
-- profit = prize − stake − rake (prize 0 when the player did not cash).
CREATE OR REPLACE VIEW player_results_usd AS
SELECT
    e.network,
    e.player,
    e.tournament_id,
    t.name AS tournament_name,
    t.started_at,
    t.game,
    t.game_class,
    t.structure,
    t.flags,
    t.total_entrants,
    e.position,
    e.cashed,
    e.currency,
    e.stake,
    e.rake,
    e.stake + e.rake AS buy_in,
    e.prize,
    e.profit,
    e.stake / e.usd_rate AS stake_usd,
    e.rake / e.usd_rate AS rake_usd,
    (e.stake + e.rake) / e.usd_rate AS buy_in_usd,
    e.prize_usd,
    e.profit_usd,
    e.usd_rate_missing,
    e.snapshot_date
FROM tournament_entries AS e
LEFT JOIN tournaments AS t USING (network, tournament_id);

-- Return on investment by buy-in (stake + rake) in USD, per player. Entries whose currency has no
-- known rate are left out (they are counted in entries_without_rate) rather than guessed.
CREATE OR REPLACE VIEW roi_by_stake_usd AS
WITH bucketed AS (
    SELECT
        *,
        CASE
            WHEN buy_in_usd = 0 THEN 0
            WHEN buy_in_usd < 1 THEN 1
            WHEN buy_in_usd < 5 THEN 2
            WHEN buy_in_usd < 11 THEN 3
            WHEN buy_in_usd < 30 THEN 4
            WHEN buy_in_usd < 100 THEN 5
            WHEN buy_in_usd < 500 THEN 6
            ELSE 7
        END AS bucket
    FROM player_results_usd
    WHERE buy_in_usd IS NOT NULL
),
labels(bucket, stake_bucket_usd, bucket_min_usd, bucket_max_usd) AS (
    VALUES
        (0, 'freeroll', 0.0, 0.0),
        (1, '< $1', 0.0, 1.0),
        (2, '$1–5', 1.0, 5.0),
        (3, '$5–11', 5.0, 11.0),
        (4, '$11–30', 11.0, 30.0),
        (5, '$30–100', 30.0, 100.0),
        (6, '$100–500', 100.0, 500.0),
        (7, '$500+', 500.0, NULL)
)
SELECT
    b.network,
    b.player,
    l.stake_bucket_usd,
    l.bucket_min_usd,
    l.bucket_max_usd,
    count(*) AS entries,
    count(*) FILTER (WHERE b.cashed) AS cashes,
    sum(b.buy_in_usd) AS invested_usd,
    sum(b.prize_usd) AS prizes_usd,
    sum(b.profit_usd) AS profit_usd,
    sum(b.profit_usd) / nullif(sum(b.buy_in_usd), 0) * 100 AS roi_pct,
    avg(b.profit_usd / nullif(b.buy_in_usd, 0)) * 100 AS avg_roi_pct,
    (SELECT count(*) FROM player_results_usd AS m
     WHERE m.network = b.network AND m.player = b.player AND m.buy_in_usd IS NULL) AS entries_without_rate
FROM bucketed AS b
JOIN labels AS l USING (bucket)
GROUP BY ALL;

-- Per-day results from the watchlist's `window: day` filters: each night's statistics describe the
-- tournaments started on that UTC day (Profit, Stake and Rake in USD, Count), so days add up;
-- profit and ROI per day, and cumulative over the days harvested.
CREATE OR REPLACE VIEW player_daily_results AS
WITH daily AS (
    SELECT
        s.snapshot_date AS day,
        s.network,
        s.player,
        s.filter_name,
        coalesce(max(st.value_number) FILTER (WHERE st.statistic = 'Count'), 0)::BIGINT AS tournaments,
        coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Profit'), 0) AS profit_usd,
        coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Stake'), 0)
            + coalesce(max(st.value_usd) FILTER (WHERE st.statistic = 'Rake'), 0) AS buy_ins_usd
    FROM player_snapshots AS s
    JOIN player_statistics AS st USING (snapshot_date, network, player, filter_name)
    WHERE s.filter_window = 'day'
    GROUP BY ALL
)
SELECT
    day,
    network,
    player,
    filter_name,
    tournaments,
    profit_usd,
    buy_ins_usd,
    100 * profit_usd / nullif(buy_ins_usd, 0) AS roi_pct,
    sum(tournaments) OVER w AS cumulative_tournaments,
    sum(profit_usd) OVER w AS cumulative_profit_usd,
    sum(buy_ins_usd) OVER w AS cumulative_buy_ins_usd,
    100 * sum(profit_usd) OVER w / nullif(sum(buy_ins_usd) OVER w, 0) AS cumulative_roi_pct
FROM daily
WINDOW w AS (PARTITION BY network, player, filter_name ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
