"""The Prefect layer: one module per step of the flow, each a small typed task over plain functions.

The plain functions are what the tests call; the tasks (`<step>_task`, or `.fn` for the function
underneath) add only Prefect's names, retries and logging. Nothing here runs inside the scoring
processes: they import `scorekeeper.worker` alone. Modules here may import Prefect, DuckDB and the
library, never torch at import and never the worker.
"""
