-- reads: <view>
-- creates: nothing
-- No rows, only the columns of a run's predictions (which signals it can supply).
SELECT * FROM {view} LIMIT 0;
