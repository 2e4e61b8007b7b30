-- reads: labels
-- creates: other_labels
-- The other run's labels of a comparison, taken as this run's where its plan.json records none.
CREATE OR REPLACE TEMP TABLE other_labels AS SELECT * FROM labels;
