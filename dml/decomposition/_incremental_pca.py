"""IncrementalPCA: scikit-learn's batch-by-batch update, carried through the blocks in order."""
from __future__ import annotations

from numbers import Integral

import numpy as np


from dml._blocks import as_blocks, is_dask
from dml._param_validation import Interval
from dml._typing import ArrayLike, Self
from dml.base import fit_context
from dml.decomposition._base import LikelihoodMixin, ProjectionMixin
from dml.decomposition._pca_kernels import batch_bounds, incremental_block

__all__ = ["IncrementalPCA"]

_STATE = ("n_samples_seen_", "mean_", "var_", "components_", "singular_values_",
          "explained_variance_", "explained_variance_ratio_", "noise_variance_",
          "n_components_")


def _ipca_kernel(state, xb, yb, wb, n_components, batch_size, min_batch_size, name):
    """The update of one block: its batches in row order (the whole block when
    ``batch_size`` is None)."""
    rows = xb.shape[0]
    if rows == 0:
        return state
    d = xb.shape[1]
    if n_components is None:
        first = (rows if batch_size is None else
                 np.diff(batch_bounds(rows, batch_size, min_batch_size)[0])[0])
        k = min(int(first), d) if state is None else state["components"].shape[0]
    else:
        k = n_components
        if k > d:
            raise ValueError(f"{name}: n_components={k} invalid for n_features={d}, need more "
                             "rows than columns for IncrementalPCA processing")
        first = (rows if batch_size is None else
                 np.diff(batch_bounds(rows, batch_size, min_batch_size)[0])[0])
        if state is None and k > first:
            raise ValueError(f"{name}: n_components={k} must be less or equal to the batch "
                             f"number of samples {first} for the first batch; make the first "
                             "batch (block) longer or ask for fewer components")
    return incremental_block(state, xb, k, batch_size or rows, min_batch_size)


class IncrementalPCA(LikelihoodMixin, ProjectionMixin):
    """PCA by scikit-learn's incremental algorithm: batches update a running low-rank SVD.

    The state (mean, variance, ``n_components`` singular values and components) is small and is
    what travels: one task per block, run where the block lives, updates it with the block's
    batches and hands it on to the next block, in row order. Its memory per task is one batch,
    whatever the number of features' squares: the choice when ``n_features`` is too large for
    the d×d statistics of :class:`~dml.decomposition.PCA`.

    ``fit`` cuts batches of ``batch_size`` rows inside every block (a last batch shorter than
    ``n_components`` joins the one before, as in scikit-learn); local (NumPy/pandas) input is
    one block, so its batches are scikit-learn's exactly, and Dask input whose block lengths
    are multiples of ``batch_size`` gives scikit-learn's batches too. ``partial_fit`` treats
    local X as one batch (as scikit-learn) and every block of Dask X as one batch.

    Parameters
    ----------
    n_components : int or None, default=None
        Components to keep; None: ``min(n_features, rows of the first batch)``.
    whiten : bool, default=False
    copy : bool, default=True
        Accepted for compatibility; the input is never modified.
    batch_size : int or None, default=None
        Rows per batch in ``fit``; None: ``5 * n_features``.

    Attributes
    ----------
    components_, explained_variance_, explained_variance_ratio_, singular_values_, mean_, \
var_, noise_variance_, n_components_, n_samples_seen_, batch_size_, n_features_in_
        As scikit-learn's ``IncrementalPCA``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.decomposition import IncrementalPCA
    >>> X = np.array([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]], dtype=float)
    >>> ipca = IncrementalPCA(n_components=2, batch_size=3).fit(X)
    >>> ipca.explained_variance_ratio_.round(4)
    array([0.9924, 0.0076])
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "whiten": ["boolean"],
        "copy": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_components=None, *, whiten=False, copy=True, batch_size=None):
        self.n_components = n_components
        self.whiten = whiten
        self.copy = copy
        self.batch_size = batch_size

    def _blocks(self, X, reset):
        if is_dask(X):
            return self._fit_blocks(X, None, None, reset=reset, require_y=False)
        # Local input is one block: the batches are then cut as scikit-learn cuts them.
        n = X.shape[0] if hasattr(X, "shape") else (len(X) if hasattr(X, "__len__") else 0)
        blocks = as_blocks(X, spec=self._spec(), block_rows=max(n, 1))
        if blocks.n_samples == 0:
            raise ValueError(f"{type(self).__name__}: X has 0 rows (Found array with 0 "
                             "sample(s)); pass at least one row of training data.")
        self._record_layout(blocks, reset)
        return blocks

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Fit on X batch by batch (``batch_size`` rows), the blocks in row order.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : IncrementalPCA

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import IncrementalPCA
        >>> X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.1], [3.0, 2.9]])
        >>> IncrementalPCA(1, batch_size=2).fit(X).n_samples_seen_
        4
        """
        for attr in _STATE:
            if hasattr(self, attr):
                delattr(self, attr)
        blocks = self._blocks(X, reset=True)
        d = blocks.n_features
        self.batch_size_ = 5 * d if self.batch_size is None else self.batch_size
        return self._run(blocks, None, self.batch_size_)

    @fit_context
    def partial_fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Update the model with X: one batch for local input, one batch per block for Dask.

        Parameters
        ----------
        X : ndarray, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : IncrementalPCA

        Examples
        --------
        >>> import numpy as np
        >>> from dml.decomposition import IncrementalPCA
        >>> ipca = IncrementalPCA(1).partial_fit(np.array([[0.0, 0.0], [1.0, 1.0]]))
        >>> ipca.partial_fit(np.array([[2.0, 2.0], [3.0, 3.1]])).n_samples_seen_
        4
        """
        first = not hasattr(self, "components_")
        blocks = self._blocks(X, reset=first)
        state = None if first else self._state()
        if (not first and self.n_components is not None
                and self.components_.shape[0] != self.n_components):
            raise ValueError(f"{type(self).__name__}: the number of components changed from "
                             f"{self.components_.shape[0]} to {self.n_components} between calls "
                             "to partial_fit; keep n_components fixed")
        return self._run(blocks, state, None)

    def _state(self):
        return {"n": int(self.n_samples_seen_), "mean": self.mean_, "var": self.var_,
                "singular_values": self.singular_values_, "components": self.components_}

    def _run(self, blocks, state, batch_size):
        min_batch = self.n_components or 0
        state = blocks.fold(_ipca_kernel, state, self.n_components, batch_size, min_batch,
                            type(self).__name__)
        if state is None:
            raise ValueError(f"{type(self).__name__}: X has 0 rows (Found array with 0 "
                             "sample(s)); pass at least one row of training data.")
        self.n_samples_seen_ = state["n"]
        self.mean_ = state["mean"]
        self.var_ = state["var"]
        self.components_ = state["components"]
        self.singular_values_ = state["singular_values"]
        self.explained_variance_ = state["explained_variance"]
        self.explained_variance_ratio_ = state["explained_variance_ratio"]
        self.noise_variance_ = state["noise_variance"]
        self.n_components_ = int(self.components_.shape[0])
        return self
