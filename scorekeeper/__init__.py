"""scorekeeper: exact offline batch scoring and evaluation of text classifiers."""

__version__ = "0.1.0"
