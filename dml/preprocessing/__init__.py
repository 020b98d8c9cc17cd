"""Scalers and one-hot encoding whose statistics come from one reduction pass over all blocks.

:class:`StandardScaler`, :class:`MinMaxScaler` and :class:`OneHotEncoder` learn their statistics
with one :meth:`dml._blocks.Blocks.map_reduce` (per-block kernels, fixed-order tree combine) and
transform blockwise: NumPy/pandas in gives NumPy out, Dask in gives a lazy Dask array out. As in
scikit-learn, ``set_output(transform="pandas")`` gives DataFrames instead: pandas ones that keep
the input's index, lazy Dask DataFrames for Dask input, with the columns named by
``get_feature_names_out()`` (see :class:`dml.base.TransformOutputMixin`). Fitted
attributes are named and valued as scikit-learn's (docs/preprocessing.md; otherwise they follow
scikit-learn 1.9).

One-pass fitting protocol
-------------------------
Every transformer here implements a small internal protocol so that a composite (for example
:class:`dml.compose.ColumnTransformer`) can fit several transformers with ONE pass over the data:

``_fit_overrides``
    :class:`~dml._blocks.BlockSpec` overrides the transformer's training blocks need
    (``{"allow_nan": True}`` for the scalers, ``{"numeric": False}`` for the encoder).
``_fit_delayed(blocks, reset=True) -> Delayed``
    Validate the hyper-parameters, record (``reset=True``) or check the feature layout of
    ``blocks`` and return the lazy reduction (``map_reduce(..., compute_now=False)``).
``_set_fitted(result, reset=True) -> self``
    Finish the fit from the computed reduction (with ``reset=False``: merge into the current
    state, as ``partial_fit`` does).
``_transform_plan(dtypes) -> TransformPlan``
    How to transform one already-extracted block: ``(kernel, args, overrides, dtype, n_out)``;
    ``dtypes`` are the column dtypes of the input (they decide e.g. float32 vs float64 output).

A composite computes the delayed results of all its parts with one :func:`dml._blocks.compute`
and hands each part its result.

Layout: the protocol and the mixin implementing it in :mod:`dml.preprocessing._base`; the
scalers in :mod:`dml.preprocessing._scalers`, :class:`MaxAbsScaler` and :class:`Normalizer`
(which keep sparse X sparse) in :mod:`dml.preprocessing._norms`; the encoder in
:mod:`dml.preprocessing._encoders` with its per-block kernels (plain NumPy/pandas) in
:mod:`dml.preprocessing._encoder_kernels`.
"""
from dml._lazy import attach as _attach

__all__ = ["StandardScaler", "MinMaxScaler", "MaxAbsScaler", "Normalizer", "OneHotEncoder",
           "TransformPlan"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "StandardScaler": "dml.preprocessing._scalers",
    "MinMaxScaler": "dml.preprocessing._scalers",
    "MaxAbsScaler": "dml.preprocessing._norms",
    "Normalizer": "dml.preprocessing._norms",
    "OneHotEncoder": "dml.preprocessing._encoders",
    "TransformPlan": "dml.preprocessing._base",
})
