-- What each player and filter cost each night (searches of the player resources).
SELECT
    snapshot_date AS night,
    coalesce(account, '') AS account,
    network,
    player,
    filter_name,
    count(*) AS attempts,
    sum(cost)::BIGINT AS searches
FROM {{ source('warehouse', 'search_ledger') }}
WHERE player IS NOT NULL
GROUP BY snapshot_date, coalesce(account, ''), network, player, filter_name
