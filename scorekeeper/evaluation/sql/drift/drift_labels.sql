-- reads: nothing
-- creates: drift_labels
-- The labels (outputs) whose signals both runs supply, with their position in this run's label order.
CREATE OR REPLACE TEMP TABLE drift_labels AS
SELECT unnest($ids::BIGINT[]) AS label_id, unnest($names::VARCHAR[]) AS label_name;
