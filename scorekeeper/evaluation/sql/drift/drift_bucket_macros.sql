-- reads: nothing
-- creates: drift_bin, drift_bucket
-- Where a numeric value falls, as macros shared by the bucket counts and the KS refinement (so both
-- place every value alike). drift_bin: its bin, the edges below it (at most 9: `padded` holds the
-- ascending edges padded with +inf, which no value is above). drift_bucket: its bucket, bin * k + the
-- value's place among k equal-width sub-intervals of the bin from `anchors[bin + 1]` (the bin's lower
-- end: the reference's smallest value for the first bin), `scales[bin + 1]` = k / the bin's width
-- (0 for a bin of no width): floor((num - anchor) * scale), held to [0, k - 1]. Both are
-- non-decreasing in the value, so buckets are intervals in value order.
CREATE OR REPLACE TEMP MACRO drift_bin(num, padded) AS
    -- the first edge at or above the value, found by halving (the edges ascend)
    CASE WHEN num IS NULL THEN NULL
         WHEN num <= padded[5] THEN
             CASE WHEN num <= padded[2] THEN (CASE WHEN num <= padded[1] THEN 0 ELSE 1 END)
                  WHEN num <= padded[3] THEN 2 WHEN num <= padded[4] THEN 3 ELSE 4 END
         ELSE CASE WHEN num <= padded[6] THEN 5 WHEN num <= padded[7] THEN 6 WHEN num <= padded[8] THEN 7
                   WHEN num <= padded[9] THEN 8 ELSE 9 END END;
CREATE OR REPLACE TEMP MACRO drift_bucket(num, bin, anchors, scales, k) AS
    CASE WHEN num IS NULL THEN NULL
         WHEN scales[bin + 1] = 0 THEN bin * k
         ELSE bin * k + least(k - 1, greatest(0, floor((num - anchors[bin + 1]) * scales[bin + 1])))::BIGINT END;
