"""Explicit feature maps that approximate kernels: a kernel machine as a linear model at scale.

:class:`RBFSampler` (random Fourier features) and :class:`Nystroem` (a map built from a sample
of training rows) turn each row into a fixed number of features whose inner products
approximate a kernel. ``transform`` is a per-block map (nothing is gathered), so random features
followed by :class:`dml.linear_model.LinearSVC` or :class:`~dml.linear_model.SGDClassifier`
train a kernel SVM on data of any size. See ``docs/kernel_approximation.md``.
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics.pairwise import KERNEL_PARAMS, PAIRWISE_KERNEL_FUNCTIONS

from dml._blocks import BlockSpec, block_rng, seed_from
from dml._param_validation import RANDOM_STATE, Integral, Interval, Real, StrOptions
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, TransformOutputMixin, check_is_fitted, fit_context

__all__ = ["RBFSampler", "Nystroem"]


def _legacy_random_state(random_state) -> np.random.RandomState:
    """scikit-learn's ``check_random_state``, also for a NumPy Generator (seeded from it)."""
    from sklearn.utils import check_random_state

    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(seed_from(random_state) % 2**32)
    return check_random_state(random_state)


def _fit_input(est, X, y):
    """Blocks of X and, for local input, X itself validated as a NumPy array (as scikit-learn
    checks X in ``fit``); Dask input is checked block by block when it is read."""
    blocks = est._fit_blocks(X, y if isinstance(y, str) else None, None, require_y=False)
    local = None
    if blocks.local:
        if isinstance(y, str):
            X = X.drop(columns=[y])
        local = est._predict_input(X, check_features=False)
    return blocks, local


# --------------------------------------------------------------------------------------------
# Random Fourier features
# --------------------------------------------------------------------------------------------

def _rbf_features(xb, weights, offset, scale):
    projection = xb @ weights
    projection += offset
    np.cos(projection, projection)
    projection *= scale
    return projection


def _moments_block(xb, yb, wb):
    n = xb.size
    mean = float(xb.mean()) if n else 0.0
    return np.array([n, mean, float(((xb - mean) ** 2).sum()) if n else 0.0])


def _merge_moments(parts):
    n, mean, m2 = parts[0]
    for nb, mb, m2b in parts[1:]:
        total = n + nb
        if total > 0:
            delta = mb - mean
            m2 = m2 + m2b + delta * delta * n * nb / total
            mean = mean + delta * nb / total
        n = total
    return np.array([n, mean, m2])


class RBFSampler(TransformOutputMixin, DaskEstimatorMixin, ClassNamePrefixFeaturesOutMixin,
                 TransformerMixin, BaseEstimator):
    """Random Fourier features approximating the RBF kernel ``exp(-gamma ‖x − y‖²)``.

    ``fit`` draws the random directions and offsets on the client — with the same
    ``random_state`` they are scikit-learn's, number for number (the same generator calls in the
    same order) — and ``transform`` maps every block independently: ``sqrt(2 / n_components) ·
    cos(X W + b)``. Only ``gamma="scale"`` reads the data in ``fit`` (one pass for the variance).

    Parameters
    ----------
    gamma : "scale" or float, default=1.0
        Kernel width. ``"scale"``: ``1 / (n_features · X.var())`` (the variance of all entries
        of X), 1.0 when that variance is 0.
    n_components : int, default=100
        Number of random features.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the random weights (a Generator seeds a RandomState).

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features, n_components)
    random_offset_ : ndarray of shape (n_components,)
        Both float32 when X is float32, as in scikit-learn.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.kernel_approximation import RBFSampler
    >>> X = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    >>> Z = RBFSampler(gamma=1.0, n_components=3, random_state=1).fit_transform(X)
    >>> Z.shape
    (4, 3)
    """

    _parameter_constraints = {
        "gamma": [StrOptions({"scale"}), Interval(Real, 0.0, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, *, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Draw the random weights for X's number of features.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None or str, default=None
            Ignored; a column name of X's dataframe is left out of the features.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.kernel_approximation import RBFSampler
        >>> RBFSampler(n_components=5, random_state=0).fit(np.zeros((3, 2))).random_weights_.shape
        (2, 5)
        """
        blocks, local = _fit_input(self, X, y)
        d = blocks.n_features
        rs = _legacy_random_state(self.random_state)
        if self.gamma == "scale":
            if local is not None:
                var = float(local.var())
            else:
                n, _, m2 = blocks.map_reduce(_moments_block, combine=_merge_moments)
                var = float(m2 / n) if n else 0.0
            self._gamma = 1.0 / (d * var) if var != 0 else 1.0
        else:
            self._gamma = self.gamma
        self.random_weights_ = (2.0 * self._gamma) ** 0.5 * rs.normal(size=(d, self.n_components))
        self.random_offset_ = rs.uniform(0, 2 * np.pi, size=self.n_components)
        if _is_float32(X, local):
            self.random_weights_ = self.random_weights_.astype(np.float32)
            self.random_offset_ = self.random_offset_.astype(np.float32)
        self._n_features_out = self.n_components
        return self

    def transform(self, X: ArrayLike) -> Any:
        """Random Fourier features of X.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape (n_samples, n_components)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.kernel_approximation import RBFSampler
        >>> rbf = RBFSampler(n_components=4, random_state=0).fit(np.zeros((2, 3)))
        >>> rbf.transform(np.ones((2, 3))).shape
        (2, 4)
        """
        check_is_fitted(self, "random_weights_")
        w = self.random_weights_
        return self._blockwise(X, _rbf_features, w, self.random_offset_,
                               (2.0 / self.n_components) ** 0.5, dtype=w.dtype,
                               tail_shape=(self.n_components,))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _is_float32(X, local) -> bool:
    if local is not None:
        return local.dtype == np.float32
    dtype = getattr(X, "dtype", None)
    if dtype is None:
        dtypes = getattr(X, "dtypes", None)
        return dtypes is not None and len(dtypes) > 0 and all(t == np.float32 for t in dtypes)
    return dtype == np.float32


# --------------------------------------------------------------------------------------------
# Nyström
# --------------------------------------------------------------------------------------------

def _nystroem_features(xb, components, normalization, kernel, params):
    from sklearn.metrics.pairwise import pairwise_kernels

    embedded = pairwise_kernels(xb, components, metric=kernel, filter_params=True, **params)
    return np.asarray(embedded, dtype=np.float64) @ normalization.T


class Nystroem(TransformOutputMixin, DaskEstimatorMixin, ClassNamePrefixFeaturesOutMixin,
               TransformerMixin, BaseEstimator):
    """Approximate a kernel map from a sample of training rows (the Nyström method).

    ``fit`` picks ``n_components`` training rows, computes the kernel among them on the client
    and keeps the inverse square root of that matrix (``normalization_``, from its SVD as in
    scikit-learn); ``transform`` evaluates the kernel between each block's rows and the picked
    rows and applies the normalisation, block by block.

    The rows are a uniform sample without replacement. For NumPy/pandas input they are the
    rows scikit-learn picks with the same ``random_state`` (the first ``n_components`` of a
    random permutation), so the fitted map equals scikit-learn's. Unlike scikit-learn, the map
    is computed in float64 for float32 input too: the normalisation inverts the square root
    of a kernel matrix that is often nearly singular, which float32 would turn into large
    errors. For Dask input the sample is
    drawn by global row index with a generator whose cost does not grow with the number of rows
    (no permutation of all rows on the client): the same for any partitioning, but not
    scikit-learn's rows.

    Parameters
    ----------
    kernel : str or callable, default="rbf"
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` ("rbf", "laplacian",
        "poly"/"polynomial", "sigmoid", "linear", "cosine", "chi2", "additive_chi2") or a
        picklable callable of two rows (it runs on the workers).
    gamma, coef0, degree : float, default=None
        Kernel parameters (None: the kernel's default); only those the kernel takes are used.
    kernel_params : dict, default=None
        More keyword arguments of a callable kernel.
    n_components : int, default=100
        Number of rows in the sample, and of output features (at most n_samples).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the sample.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The sampled rows.
    component_indices_ : ndarray of shape (n_components,)
        Their indices in the training data.
    normalization_ : ndarray of shape (n_components, n_components)
        Inverse square root of the kernel matrix of the sampled rows.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.kernel_approximation import Nystroem
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> ny = Nystroem(gamma=0.1, n_components=4, random_state=0).fit(X)
    >>> ny.transform(X).shape
    (10, 4)
    """

    # float64 whatever X's dtype: the normalisation inverts the square root of a kernel matrix
    # that is often nearly singular, which float32 kernels would turn into large errors.
    _block_spec = BlockSpec(dtype=(np.float64,))

    _parameter_constraints = {
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "coef0": [Interval(Real, None, None, closed="neither"), None],
        "degree": [Interval(Real, 1, None, closed="left"), None],
        "kernel_params": [dict, None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, kernel="rbf", *, gamma=None, coef0=None, degree=None, kernel_params=None,
                 n_components=100, random_state=None):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state

    def _kernel_params(self) -> dict:
        params = dict(self.kernel_params or {})
        if callable(self.kernel):
            if self.gamma is not None or self.coef0 is not None or self.degree is not None:
                raise ValueError(f"{type(self).__name__}: Don't pass gamma, coef0 or degree to "
                                 "Nystroem if using a callable kernel; pass them in "
                                 "kernel_params instead")
            return params
        for name in KERNEL_PARAMS[self.kernel]:
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        return params

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Sample the component rows and compute the normalisation.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
        y : None or str, default=None
            Ignored; a column name of X's dataframe is left out of the features.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.kernel_approximation import Nystroem
        >>> ny = Nystroem(kernel="poly", degree=2, n_components=3, random_state=0)
        >>> ny.fit(np.arange(12.0).reshape(6, 2)).normalization_.shape
        (3, 3)
        """
        from sklearn.metrics.pairwise import pairwise_kernels

        params = self._kernel_params()
        blocks, local = _fit_input(self, X, y)
        n = blocks.n_samples
        k = self.n_components
        if k > n:
            warnings.warn(f"n_components > n_samples ({k} > {n}). This is not possible: "
                          f"n_components was set to n_samples, which results in inefficient "
                          "evaluation of the full kernel.", stacklevel=3)
            k = n
        if local is not None:
            indices = _legacy_random_state(self.random_state).permutation(n)[:k]
            basis = local[indices]
        else:
            seed = seed_from(self.random_state)
            indices = np.sort(block_rng(seed, "nystroem").choice(n, size=k, replace=False))
            basis = blocks.rows_at(indices)
        basis_kernel = np.asarray(pairwise_kernels(basis, metric=self.kernel, filter_params=True,
                                                   **params), dtype=np.float64)
        U, S, V = np.linalg.svd(basis_kernel)
        S = np.maximum(S, 1e-12)
        self.normalization_ = U / np.sqrt(S) @ V
        self.components_ = basis
        self.component_indices_ = np.asarray(indices, dtype=np.int64)
        self._n_features_out = k
        return self

    def transform(self, X: ArrayLike) -> Any:
        """The Nyström features of X.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape (n_samples, n_components)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.kernel_approximation import Nystroem
        >>> X = np.arange(12.0).reshape(6, 2)
        >>> ny = Nystroem(kernel="linear", n_components=2, random_state=0).fit(X)
        >>> ny.transform(X[:2]).shape
        (2, 2)
        """
        check_is_fitted(self, "normalization_")
        norm = self.normalization_
        return self._blockwise(X, _nystroem_features, self.components_, norm, self.kernel,
                               self._kernel_params(), dtype=np.float64,
                               tail_shape=(norm.shape[0],))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
