-- reads: evaluated
-- creates: nothing
-- Scores (probability of the predicted label) of correct and wrong rows in 20 equal-width bins:
-- bin b holds scores in [b/20, (b+1)/20), the last bin also 1.0 (numpy.histogram's convention).
-- floor(score * 20) can land one bin off at an edge, so it is checked against the edges themselves.
WITH guessed AS (
    SELECT correct, score, CAST(floor(score * 20) AS BIGINT) AS b
    FROM evaluated
), binned AS (
    SELECT correct,
           least(greatest(b - CASE WHEN score < b::DOUBLE / 20 THEN 1 ELSE 0 END
                            + CASE WHEN score >= (b + 1)::DOUBLE / 20 THEN 1 ELSE 0 END, 0), 19) AS bin
    FROM guessed
)
SELECT bin, count(*) FILTER (WHERE correct) AS correct, count(*) FILTER (WHERE NOT correct) AS wrong
FROM binned
GROUP BY bin
ORDER BY bin;
