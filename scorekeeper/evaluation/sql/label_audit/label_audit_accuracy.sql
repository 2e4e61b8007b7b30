-- reads: evaluated, audit_suspected
-- creates: nothing
-- Accuracy over the evaluated rows that are not suspected label errors (rows with a label the model
-- does not know stay in, as errors, as they do in accuracy).
SELECT avg(CASE WHEN e.correct THEN 1.0 ELSE 0.0 END)
FROM evaluated AS e
ANTI JOIN audit_suspected AS a ON a.row_index = e.row_index;
