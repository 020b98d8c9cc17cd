"""Ensembles trained across Dask workers: random forests of histogram trees (SPEC §6)."""
from dml.ensemble._forest import RandomForestClassifier, RandomForestRegressor

__all__ = ["RandomForestClassifier", "RandomForestRegressor"]
