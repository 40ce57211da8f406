-- Players by profit in USD over every harvested tournament (amounts converted at the rates of the
-- night each tournament started in; tournaments in a currency without a rate are counted apart,
-- never guessed). `tourneylake query` writes money with 2 decimals, percentages with 1.
SELECT
    network,
    player,
    count(*)                                           AS tournaments,
    round(sum(buy_in_usd), 2)                          AS buy_ins_usd,
    round(sum(profit_usd), 2)                          AS profit_usd,
    round(100 * sum(profit_usd) / nullif(sum(buy_in_usd), 0), 1) AS roi_pct,
    count(*) FILTER (WHERE usd_rate_missing)           AS without_rate
FROM player_results_usd
GROUP BY ALL
ORDER BY profit_usd DESC NULLS LAST
LIMIT 10;
