-- reads: nothing
-- creates: <view>
-- A run's parquet file as the temp view {view}, its URI the connection's variable {variable} (a value,
-- never SQL text; duck.parquet_view sets it).
CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM read_parquet(getvariable({variable}));
