"""The scoring worker: the program `accelerate launch` runs. Imports no Prefect and no DuckDB."""
