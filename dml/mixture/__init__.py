"""Mixture models: :class:`GaussianMixture` fitted by distributed EM.

Each EM step is one pass over the row blocks in which every block returns the sufficient
statistics of its rows (responsibility sums, weighted sums, centred weighted scatter, its
log-likelihood); see ``docs/mixture.md``.
"""
__all__ = ["GaussianMixture"]


def __getattr__(name):
    # Lazy, so that workers unpickling a kernel of dml.mixture._gmm_kernels do not import the
    # estimator's dependencies.
    if name == "GaussianMixture":
        from dml.mixture._gaussian_mixture import GaussianMixture

        return GaussianMixture
    raise AttributeError(f"module 'dml.mixture' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
