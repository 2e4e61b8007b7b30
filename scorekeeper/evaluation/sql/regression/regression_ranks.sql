-- reads: <cells>
-- creates: <ranks>
-- Average ranks (1-based, ties sharing the mean of their ranks, scipy.stats.rankdata's "average")
-- of the truth and of the prediction per output of {cells} (reg_cells' shape), for Spearman's rho: table {ranks}.
CREATE OR REPLACE TEMP TABLE {ranks} AS
SELECT output_id,
       rank() OVER (PARTITION BY output_id ORDER BY truth) + (count(*) OVER (PARTITION BY output_id, truth) - 1) / 2 AS truth_rank,
       rank() OVER (PARTITION BY output_id ORDER BY prediction) + (count(*) OVER (PARTITION BY output_id, prediction) - 1) / 2 AS prediction_rank
FROM {cells};
