-- Where the service listed every tournament of a fixed window (`listed_all`), the lake's entries
-- give the count it served, and ROI and ITM within `served_tolerance_pct` points (the total ROI
-- where every entry had its own night's USD rates): a row here means the lake's entries for that
-- window are incomplete or read differently from the service's.
{{ config(severity='warn') }}
SELECT *
FROM {{ ref('computed_vs_served') }}
WHERE listed_all
    AND (
        entries_difference <> 0
        OR (usd_at_own_rates AND abs(total_roi_difference_pct) > {{ var('served_tolerance_pct') }})
        OR abs(avg_roi_difference_pct) > {{ var('served_tolerance_pct') }}
        OR abs(itm_difference_pct) > {{ var('served_tolerance_pct') }}
    )
