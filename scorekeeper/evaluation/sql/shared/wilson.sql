-- reads: nothing
-- creates: wilson
-- wilson(successes, trials): the Wilson score 95% interval [low, high] of a proportion
-- (z = 1.959963984540054, the 97.5% normal quantile); null when there are no trials.
CREATE OR REPLACE TEMP MACRO wilson(x, n) AS
    CASE WHEN n > 0 THEN [
        greatest(0.0, ((x::DOUBLE / n) + 1.959963984540054 ^ 2 / (2.0 * n)
            - 1.959963984540054 * sqrt((x::DOUBLE / n) * (1 - x::DOUBLE / n) / n + 1.959963984540054 ^ 2 / (4.0 * n * n)))
            / (1 + 1.959963984540054 ^ 2 / n)),
        least(1.0, ((x::DOUBLE / n) + 1.959963984540054 ^ 2 / (2.0 * n)
            + 1.959963984540054 * sqrt((x::DOUBLE / n) * (1 - x::DOUBLE / n) / n + 1.959963984540054 ^ 2 / (4.0 * n * n)))
            / (1 + 1.959963984540054 ^ 2 / n))
    ] END;
