-- reads: paired
-- creates: nothing
-- Rows the two runs got differently: right -> wrong, wrong -> right, and both wrong but with
-- different predictions (other; a prediction of the same label id spelled differently is the same).
SELECT count(*) AS rows_compared,
       count(*) FILTER (WHERE right_before AND NOT right_after) AS right_to_wrong,
       count(*) FILTER (WHERE NOT right_before AND right_after) AS wrong_to_right,
       count(*) FILTER (WHERE NOT right_before AND NOT right_after AND before_class <> after) AS other
FROM paired;
