"""The paired statistics of a comparison, in one place: pure functions over aggregates (numpy and
math only, no DuckDB), each result in paired_tests.result's shape. paired_tests.py holds the tests
of counts, means, ranks and the row bootstrap (every kind), paired_blocks.py the block and
row-sample bootstraps of the metrics that are functions of sums over rows (multi-label and
regression), families.py what a comparison makes of them (Holm's families, the counts, the test
a metric gets when nothing computes it)."""
