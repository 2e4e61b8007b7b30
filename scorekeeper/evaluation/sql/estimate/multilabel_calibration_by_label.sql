-- reads: ml_cells
-- creates: nothing
-- What a later run's F1 estimate needs of a multi-label run (docs/drift.md): per label and per bin of
-- its probability ($bins equal-width bins [j/$bins, (j+1)/$bins), the last holding 1.0), the
-- evaluated cells in the bin and those whose truth includes the label.
SELECT label_id,
       least(CAST(floor(prob * $bins) AS INTEGER), $bins - 1) AS bin,
       count(*) AS rows,
       count(*) FILTER (WHERE truth) AS truth
FROM ml_cells
GROUP BY ALL
ORDER BY ALL;
