-- Every stake is converted to USD or flagged as lacking a rate: never silently NULL.
SELECT network, tournament_id, currency, stake
FROM {{ source('warehouse', 'tournaments') }}
WHERE stake IS NOT NULL AND stake_usd IS NULL AND NOT coalesce(usd_rate_missing, false)
