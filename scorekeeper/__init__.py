"""scorekeeper: exact offline batch scoring and evaluation of text classifiers.

The library: parameters, storage, the run folder and its records, the process boundary, staging,
metrics, gates, the CLI and the demo. Importing any of it imports no Prefect (the CLI imports
Prefect inside its functions); the Prefect layer is tasks/ and flows/, the scoring worker is
`scorekeeper.worker`.
"""

__version__ = "0.1.0"
