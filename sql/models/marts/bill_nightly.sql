-- What each night cost, per account and resource: searches spent (the ledger's `cost`), the
-- calls and retries that spent them, and the players and filters harvested.
WITH harvested AS (
    SELECT snapshot_date, count(*) AS pairs_harvested, count(DISTINCT (network, player)) AS players_harvested
    FROM {{ source('warehouse', 'player_snapshots') }}
    GROUP BY snapshot_date
)
SELECT
    l.snapshot_date AS night,
    coalesce(l.account, '') AS account,
    l.resource,
    count(*) AS attempts,
    count(*) FILTER (WHERE l.attempt > 1) AS retries,
    count(*) FILTER (WHERE l.outcome = 'ok') AS answered,
    count(*) FILTER (WHERE l.outcome NOT IN ('ok', 'reconciled', 'reconciled_after_crash', 'external_spending')) AS failed_attempts,
    sum(l.cost)::BIGINT AS searches,
    sum(l.cost) FILTER (WHERE l.outcome IN ('reconciled', 'reconciled_after_crash'))::BIGINT AS searches_reconciled,
    min(l.remaining_after) AS fewest_searches_left,
    any_value(h.pairs_harvested) AS pairs_harvested_that_night,
    any_value(h.players_harvested) AS players_harvested_that_night
FROM {{ source('warehouse', 'search_ledger') }} AS l
LEFT JOIN harvested AS h USING (snapshot_date)
GROUP BY l.snapshot_date, coalesce(l.account, ''), l.resource
