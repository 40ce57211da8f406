-- Return on investment by buy-in (stake + rake) in USD, per player. Entries whose currency has no
-- known rate are left out (they are counted in entries_without_rate) rather than guessed.
WITH bucketed AS (
    SELECT *, {{ stake_bucket('buy_in_usd') }} AS bucket
    FROM {{ ref('player_results_usd') }}
    WHERE buy_in_usd IS NOT NULL
),
without_rate AS (
    SELECT network, player, count(*) FILTER (WHERE buy_in_usd IS NULL) AS entries_without_rate
    FROM {{ ref('player_results_usd') }}
    GROUP BY ALL
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
    any_value(w.entries_without_rate) AS entries_without_rate
FROM bucketed AS b
JOIN {{ ref('stake_buckets') }} AS l USING (bucket)
JOIN without_rate AS w USING (network, player)
GROUP BY b.network, b.player, l.stake_bucket_usd, l.bucket_min_usd, l.bucket_max_usd
