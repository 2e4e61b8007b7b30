-- reads: planned, staged
-- creates: nothing
-- Ground truth handed back to a run with a pinned labelling plan, before anything starts
-- (labelling.plan_labels_refusal): the staged ground truth (getvariable('pp_truth_file'): id, label)
-- against the plan's rows (planned: its label_plan.parquet) and the run's staged rows, ids compared
-- as text. The ground truth's rows whose id is a plan row's (labelled or not), and its distinct
-- labelled ids that are rows of the run outside the plan, with the first three of them.
WITH truth AS (
    SELECT id::VARCHAR AS id, label IS NOT NULL AS labelled FROM read_parquet(getvariable('pp_truth_file'))
), plan_ids AS (
    SELECT id::VARCHAR AS id FROM planned
), run_ids AS (
    SELECT id::VARCHAR AS id FROM staged
), outside AS (
    SELECT DISTINCT t.id FROM truth AS t
    SEMI JOIN run_ids AS r ON r.id = t.id
    ANTI JOIN plan_ids AS p ON p.id = t.id
    WHERE t.labelled
)
SELECT (SELECT count(*) FROM truth AS t SEMI JOIN plan_ids AS p ON p.id = t.id),
       (SELECT count(*) FROM outside),
       (SELECT list(id ORDER BY id)[:3] FROM outside)
