-- reads: ml_cells, ml_labels
-- creates: nothing
-- The F1-optimal threshold per label, chosen on the tuning half of `ml_cells` and measured on the
-- held-out half. Candidates: for each distinct probability s on the tuning half (highest first),
-- predicting the cells at or above s; its threshold is the midpoint between s and the next lower
-- distinct probability (0 below the lowest; the next lower itself where the midpoint rounds onto
-- s), so that "strictly above the threshold" predicts exactly those cells. Ties in F1 go to the
-- higher threshold (no two candidates of a label share one: each lies in its own gap between
-- scores). A label with no positive on the tuning half has no tuned threshold (every candidate
-- scores 0). F1 on the held-out half counts 0/0 as 0; null where that half is empty.
WITH grouped AS (
    SELECT label_id, prob AS score,
           count(*) FILTER (WHERE truth) AS pos,
           count(*) AS n
    FROM ml_cells
    WHERE tuning
    GROUP BY label_id, prob
), running AS (
    SELECT label_id, score,
           sum(pos) OVER at_or_above AS tp,
           sum(n) OVER at_or_above AS predicted,
           sum(pos) OVER (PARTITION BY label_id) AS positives,
           coalesce(lead(score) OVER (PARTITION BY label_id ORDER BY score DESC), 0.0) AS next_lower
    FROM grouped
    WINDOW at_or_above AS (PARTITION BY label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), candidates AS (
    SELECT label_id,
           CASE WHEN (score + next_lower) / 2 < score THEN (score + next_lower) / 2 ELSE next_lower END AS threshold,
           2 * tp / (predicted + positives) AS f1
    FROM running
    WHERE positives > 0 AND score > next_lower
), best AS (
    -- the largest (f1, threshold), in one pass per label: no window sorting every candidate
    SELECT label_id, top.threshold AS threshold, top.f1 AS f1
    FROM (SELECT label_id, max(struct_pack(f1, threshold)) AS top FROM candidates GROUP BY label_id)
), heldout AS (
    SELECT c.label_id,
           count(*) AS n,
           count(*) FILTER (WHERE c.truth) AS positives,
           count(*) FILTER (WHERE c.truth AND c.prob > b.threshold) AS tp_tuned,
           count(*) FILTER (WHERE c.prob > b.threshold) AS predicted_tuned,
           count(*) FILTER (WHERE c.truth AND c.predicted) AS tp_given,
           count(*) FILTER (WHERE c.predicted) AS predicted_given
    FROM ml_cells AS c
    LEFT JOIN best AS b ON b.label_id = c.label_id
    WHERE NOT c.tuning
    GROUP BY c.label_id
)
SELECT l.label_id, b.threshold AS tuned_threshold, b.f1 AS tuned_f1_in_sample,
       CASE WHEN b.threshold IS NOT NULL AND h.n > 0
            THEN coalesce(2 * h.tp_tuned / nullif(h.predicted_tuned + h.positives, 0), 0.0) END AS tuned_f1_heldout,
       CASE WHEN h.n > 0 THEN coalesce(2 * h.tp_given / nullif(h.predicted_given + h.positives, 0), 0.0) END AS heldout_f1_at_threshold
FROM ml_labels AS l
LEFT JOIN best AS b ON b.label_id = l.label_id
LEFT JOIN heldout AS h ON h.label_id = l.label_id
ORDER BY l.label_id;
