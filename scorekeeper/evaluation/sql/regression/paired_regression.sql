-- reads: reg_rows, labels, staged, other
-- creates: reg_paired
-- A regression comparison's paired values: per evaluated row and output, the truth y and both runs'
-- predictions (this run 'after', the other 'before'; {at} picks the output of a list), rows matched
-- by {other_key} = {this_key}; rows whose truth is not finite are left out.
CREATE TEMP TABLE reg_paired AS
SELECT * FROM (
    SELECT r.row_index, l.label_name AS output, r.truth{at} AS y, r.prediction{at} AS after, o.prediction{at} AS before
    FROM reg_rows AS r
    CROSS JOIN labels AS l
    JOIN staged AS s ON s.row_index = r.row_index
    JOIN other AS o ON {other_key} = {this_key}
) WHERE isfinite(y);
