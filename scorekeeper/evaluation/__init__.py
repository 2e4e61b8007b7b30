"""The evaluation: a run's predictions joined to its ground truth and measured in DuckDB.

A library (no Prefect, no torch): the connection (duck.py), the ground truth and the one rule it is
matched by (truth.py, matching.py), one module per kind of head behind one interface (kinds.py:
single_label.py, multi_label.py, regression.py), the slices, the label audit, the comparison with
another run and its paired statistics, and the run history. driver.py's `evaluate_run` is the one
entry point; the evaluate step (tasks/evaluation.py) calls it. The SQL lives in sql/, one folder per
kind and shared ones.
"""
