-- The field sizes (entrants) that breakdowns group by (the macro field_size_bucket() assigns them).
SELECT bucket::INTEGER AS bucket, field_size, min_entrants::INTEGER AS min_entrants, max_entrants::INTEGER AS max_entrants
FROM (
    VALUES
        (0, '1 (alone)', 1, 1),
        (1, '2 (heads-up)', 2, 2),
        (2, '3–6', 3, 6),
        (3, '7–9', 7, 9),
        (4, '10–18', 10, 18),
        (5, '19–45', 19, 45),
        (6, '46–100', 46, 100),
        (7, '101–180', 101, 180),
        (8, '181–500', 181, 500),
        (9, '501–1,000', 501, 1000),
        (10, '1,001–5,000', 1001, 5000),
        (11, 'more than 5,000', 5001, NULL)
) AS buckets(bucket, field_size, min_entrants, max_entrants)
