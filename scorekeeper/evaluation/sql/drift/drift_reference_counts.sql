-- reads: drift_values
-- creates: nothing
-- The reference's non-null values of each numeric signal (m of the decile rule).
SELECT signal, count(num) AS m
FROM drift_values
WHERE side = 'reference' AND signal IN (SELECT unnest($signals::VARCHAR[]))
GROUP BY signal;
