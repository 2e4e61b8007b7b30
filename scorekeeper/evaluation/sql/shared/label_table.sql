-- reads: nothing
-- creates: <table>
-- A model's labels as the temp table {table} (label_id, label_name), empty: truth.label_table fills
-- it with one row per label, in the model's order.
CREATE OR REPLACE TEMP TABLE {table} (label_id BIGINT, label_name VARCHAR);
