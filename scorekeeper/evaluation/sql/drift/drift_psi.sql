-- reads: drift_bins
-- creates: nothing
-- Each signal's population stability index over its B bins, shares smoothed by half a row per bin:
-- r = (a + 0.5) / (m + 0.5 B), c = (b + 0.5) / (n + 0.5 B), psi = sum (c - r) ln(c / r).
WITH totals AS (
    SELECT signal, count(*) AS bins, sum(a) AS m, sum(b) AS n FROM drift_bins GROUP BY signal
), shares AS (
    SELECT d.signal, (d.a + 0.5) / (t.m + 0.5 * t.bins) AS r, (d.b + 0.5) / (t.n + 0.5 * t.bins) AS c
    FROM drift_bins AS d JOIN totals AS t ON t.signal = d.signal
)
SELECT t.signal, t.bins, t.m, t.n, sum((s.c - s.r) * ln(s.c / s.r) ORDER BY (s.c - s.r) * ln(s.c / s.r)) AS psi
FROM totals AS t JOIN shares AS s ON s.signal = t.signal
GROUP BY t.signal, t.bins, t.m, t.n
ORDER BY t.signal;
