-- reads: nothing
-- creates: drift_edges
-- Each numeric signal's bin edges (the reference's merged deciles, ascending).
CREATE OR REPLACE TEMP TABLE drift_edges AS
SELECT unnest($signals::VARCHAR[]) AS signal, unnest($edges::DOUBLE[][]) AS edges;
