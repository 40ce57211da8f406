-- The buy-in buckets in USD that stake breakdowns group by (the macro stake_bucket() assigns them).
SELECT bucket::INTEGER AS bucket, stake_bucket_usd, bucket_min_usd::DOUBLE AS bucket_min_usd, bucket_max_usd::DOUBLE AS bucket_max_usd
FROM (
    VALUES
        (0, 'freeroll', 0.0, 0.0),
        (1, '< $1', 0.0, 1.0),
        (2, '$1–5', 1.0, 5.0),
        (3, '$5–11', 5.0, 11.0),
        (4, '$11–30', 11.0, 30.0),
        (5, '$30–100', 30.0, 100.0),
        (6, '$100–500', 100.0, 500.0),
        (7, '$500+', 500.0, NULL)
) AS buckets(bucket, stake_bucket_usd, bucket_min_usd, bucket_max_usd)
