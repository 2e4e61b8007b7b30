"""metrics.json: the typed document (document.py) and the one registry of its metrics (registry.py).

Prefect-free and DuckDB-free: the parameter model, the evaluation, the comparison, the gates and
the report all import it.
"""
