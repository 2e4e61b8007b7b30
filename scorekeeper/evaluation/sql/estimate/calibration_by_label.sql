-- reads: evaluated, labels
-- creates: nothing
-- What a later run's F1 estimate needs of a single-label run (docs/drift.md): per label and per bin
-- of the label's probability ($bins equal-width bins [j/$bins, (j+1)/$bins), the last holding 1.0),
-- the evaluated rows in the bin and those whose truth is the label.
SELECT l.label_id,
       least(CAST(floor(e.probabilities[l.label_id + 1] * $bins) AS INTEGER), $bins - 1) AS bin,
       count(*) AS rows,
       count(*) FILTER (WHERE e.true_id = l.label_id) AS truth
FROM evaluated AS e CROSS JOIN labels AS l
GROUP BY ALL
ORDER BY ALL;
