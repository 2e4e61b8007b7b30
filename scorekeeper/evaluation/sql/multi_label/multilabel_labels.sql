-- reads: nothing
-- creates: ml_labels
-- The model's labels with their thresholds (label_id, label_name, threshold), empty:
-- multi_label.multilabel_metrics fills it with one row per label.
CREATE OR REPLACE TEMP TABLE ml_labels (label_id BIGINT, label_name VARCHAR, threshold DOUBLE);
