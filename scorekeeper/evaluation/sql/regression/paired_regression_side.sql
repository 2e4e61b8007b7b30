-- reads: reg_paired_complete
-- creates: <table>
-- One run's side of the complete paired rows ({side}: after or before) as {table} (row_index,
-- output_id, truth, prediction): the shape regression_values reads, for the other run's metrics
-- over the paired rows.
CREATE OR REPLACE TEMP TABLE {table} AS SELECT row_index, output_id, y AS truth, {side} AS prediction FROM reg_paired_complete;
