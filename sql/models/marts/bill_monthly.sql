-- The bill per calendar month and account: searches, players charged for, and the cost of one
-- player for a month (searches ÷ players: each player's filters, every night of the month).
WITH months AS (
    SELECT date_trunc('month', snapshot_date)::DATE AS month, coalesce(account, '') AS account, *
    FROM {{ source('warehouse', 'search_ledger') }}
)
SELECT
    month,
    account,
    count(DISTINCT snapshot_date) AS nights,
    sum(cost)::BIGINT AS searches,
    (sum(cost) FILTER (WHERE player IS NOT NULL))::BIGINT AS player_searches,
    count(DISTINCT (network, player)) FILTER (WHERE player IS NOT NULL AND cost > 0) AS players,
    sum(cost) FILTER (WHERE player IS NOT NULL)
        / nullif(count(DISTINCT (network, player)) FILTER (WHERE player IS NOT NULL AND cost > 0), 0) AS searches_per_player_month
FROM months
GROUP BY month, account
