-- reads: <ranks>
-- creates: nothing
-- One output's rows of {ranks} (regression_ranks.sql's average ranks of the truth and of the prediction), for
-- Kendall's tau-b: regression.py hands them to scipy.stats.kendalltau (variant "b", O(n log n)), which counts
-- only order and ties, so the ranks give the values' tau.
SELECT truth_rank AS truth, prediction_rank AS prediction
FROM {ranks}
WHERE output_id = $output_id;
