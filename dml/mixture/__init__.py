"""Mixture models: :class:`GaussianMixture` fitted by distributed EM.

Each EM step is one pass over the row blocks in which every block returns the sufficient
statistics of its rows (responsibility sums, weighted sums, centred weighted scatter, its
log-likelihood); see ``docs/mixture.md``.
"""
from dml._lazy import attach as _attach

__all__ = ["GaussianMixture"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "GaussianMixture": "dml.mixture._gaussian_mixture",
})
