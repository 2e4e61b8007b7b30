-- reads: drift_bins
-- creates: nothing
-- Every signal's bins in order: numeric bins by position then the null bin; categorical values in
-- ascending order, then the null value, then `other`.
SELECT signal, bin, is_null, value, is_other, a, b
FROM drift_bins
ORDER BY signal, is_other, is_null, bin, value;
