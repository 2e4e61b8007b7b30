-- reads: nothing
-- creates: drift_edges
-- Each numeric signal's bin edges (the reference's merged deciles, ascending), and the same padded
-- to 9 with +inf (no value is above it), which drift_bins.sql compares with.
CREATE OR REPLACE TEMP TABLE drift_edges AS
SELECT signal, edges, list_concat(edges, list_transform(range(9 - len(edges)), lambda i: 'infinity'::DOUBLE)) AS padded
FROM (SELECT unnest($signals::VARCHAR[]) AS signal, unnest($edges::DOUBLE[][]) AS edges);
