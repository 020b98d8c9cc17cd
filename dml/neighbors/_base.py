"""Exact nearest neighbours over a training set that stays on the workers.

``fit`` validates the training rows (and y), keeps them in worker memory as persisted blocks
(:meth:`dml._blocks.Blocks.persist`) and learns nothing else. A query is brute force, built as
one task graph:

1. the queries are cut into chunks (a local array) or taken block by block (a Dask array);
2. one task per (query chunk, training group) computes the k nearest rows of that group with
   :func:`dml.neighbors._knn_kernels.search` and returns their reduced distances, global
   indices and, for the predictors, their targets;
3. the partial results of one query chunk are merged in a fixed tree over the groups, in
   training-row order (:func:`~dml.neighbors._knn_kernels.merge`), so equally distant rows
   resolve to the lower training index whatever the partitioning;
4. a last task per query chunk turns them into distances, votes or averages.

Only query chunks and k results per query travel; the training rows never leave their workers.
"""
from __future__ import annotations

import operator
import weakref
from numbers import Integral, Real

import dask
import dask.array as da
import numpy as np
from dask._task_spec import Task
from dask.delayed import Delayed

from dml._typing import Any, ArrayLike
from dml._blocks import BlockSpec, as_blocks, broadcast
from dml._graph import layer_graph, map_delayed, new_name, task_argument, task_ref, tree_reduce
from dml._param_validation import Interval, StrOptions
from dml.base import DaskEstimatorMixin, check_is_fitted
from dml.neighbors import _knn_kernels as kern

__all__ = ["NeighborsBase", "KNeighborsMixin", "KNeighborsPredictorBase"]

_ALIASES = {"l2": "euclidean", "l1": "manhattan", "cityblock": "manhattan",
            "infinity": "chebyshev"}

#: The persisted training blocks and their first-row offsets of each fitted estimator. Kept
#: beside the estimator rather than in its attributes: they are handles to data on the cluster,
#: not fitted state (model files and pickles hold the training set as NumPy instead).
_ON_CLUSTER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Query rows per task are at least this many (fewer rows make the per-task cost dominate).
_MIN_QUERY_ROWS = 256


# --------------------------------------------------------------------------------------------
# Estimator base
# --------------------------------------------------------------------------------------------

class NeighborsBase(DaskEstimatorMixin):
    """Parameters, training-set handling and the brute-force query graph."""

    _block_spec = BlockSpec(dtype=(np.float64,))

    _parameter_constraints = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "metric": [StrOptions({*kern.METRICS, *_ALIASES})],
        "p": [Interval(Real, 0, None, closed="neither")],
    }

    def _validate_param_relations(self):
        from dml._param_validation import invalid_parameter

        if self.metric == "minkowski" and self.p < 1:
            raise invalid_parameter(self, "p", "a float >= 1 for metric='minkowski' (a "
                                    "smaller p gives no distance)")

    # ---- fit ----
    def _fit_training(self, X, y=None, *, require_y=False, y_numeric=False, labels=False):
        """Validate and persist the training blocks; returns the sorted labels of y when
        ``labels`` (else None)."""
        blocks = self._fit_blocks(X, y, require_y=require_y, y_numeric=y_numeric)
        for attr in ("_fit_X", "_fit_y"):
            self.__dict__.pop(attr, None)
        blocks = blocks.persist()
        # One pass over the persisted blocks: their row counts (and labels). It validates every
        # block now (NaN, infinity, misaligned y), not at the first query.
        lengths, classes = blocks.map_reduce(kern.fit_stats, labels, combine=kern.combine_fit_stats)
        blocks.known_lengths = lengths
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        _ON_CLUSTER[self] = (blocks, offsets)
        self.n_samples_fit_ = int(offsets[-1])
        metric, p = kern.reduced_metric(_ALIASES.get(self.metric, self.metric), float(self.p))
        self.effective_metric_ = metric
        self.effective_metric_params_ = {"p": p} if metric == "minkowski" else {}
        self._local_fit = bool(blocks.local)
        return classes

    # ---- training data: on the workers; in the process only for a model file or a pickle ----
    def _training(self):
        """(persisted training blocks, first-row offsets), re-made from ``_fit_X`` after a
        load or an unpickle."""
        held = _ON_CLUSTER.get(self)
        if held is None:
            check_is_fitted(self, "n_samples_fit_")
            if "_fit_X" not in self.__dict__:
                raise ValueError(f"{type(self).__name__}: the training rows of this copy are "
                                 "not available (they stay on the cluster of the original "
                                 "estimator); fit it again, or copy it with pickle or dml.save, "
                                 "which take the training set along.")
            train = as_blocks(self._fit_X, self.__dict__.get("_fit_y"),
                              spec=self._spec()).persist()
            held = (train, np.concatenate([[0], np.cumsum(train.lengths)]).astype(np.int64))
            _ON_CLUSTER[self] = held
        return held

    def _gathered(self) -> dict:
        """``_fit_X`` (and ``_fit_y``): the training set in this process, computed once."""
        held = _ON_CLUSTER.get(self)
        if "_fit_X" not in self.__dict__ and held is not None:
            blocks = held[0]
            parts = dask.compute(*blocks.parts)
            self._fit_X = (np.concatenate([p[0] for p in parts]) if parts else
                           np.empty((0, self.n_features_in_)))
            if blocks.has_y:
                self._fit_y = np.concatenate([np.asarray(p[1]) for p in parts])
        return {k: self.__dict__[k] for k in ("_fit_X", "_fit_y") if k in self.__dict__}

    def _model_state(self) -> dict:
        """What a model file holds: the fitted attributes and the training set as NumPy
        (``_fit_X``, ``_fit_y``): the file is as large as the training data."""
        if "n_samples_fit_" in self.__dict__:
            self._gathered()
        return dict(vars(self))

    def __getstate__(self):
        if "n_samples_fit_" in self.__dict__:
            self._gathered()
        return super().__getstate__()

    # ---- queries ----
    def _check_k(self, n_neighbors, extra: int, n_queries):
        if n_neighbors is None:
            n_neighbors = self.n_neighbors
        if isinstance(n_neighbors, (bool, np.bool_)) or not isinstance(n_neighbors, Integral):
            raise TypeError(f"n_neighbors does not take {type(n_neighbors)} value, enter an "
                            "integer value")
        if n_neighbors <= 0:
            raise ValueError(f"Expected n_neighbors > 0. Got {n_neighbors}")
        k = int(n_neighbors) + extra
        if k > self.n_samples_fit_:
            rows = "" if n_queries is None else f", n_samples = {n_queries}"
            raise ValueError(
                f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {k}, n_samples_fit "
                f"= {self.n_samples_fit_}{rows}. Ask for at most {self.n_samples_fit_ - extra} "
                "neighbours, or fit on more rows.")
        return k

    def _query_parts(self, X):
        """(query parts, Dask output?, rows per part or None, self starts or None)."""
        if X is None:
            train, offsets = self._training()
            starts = [int(s) for s in offsets[:-1]]
            return list(train.parts), not self._local_fit, np.diff(offsets), starts
        data = self._predict_input(X)
        if not isinstance(data, np.ndarray):  # Blocks of a Dask query
            return list(data.parts), True, data.known_lengths, None
        if len(data) == 0:
            raise ValueError(f"{type(self).__name__}: Found array with 0 sample(s) (shape="
                             f"{data.shape}) while a minimum of 1 is required; pass at least "
                             "one query row.")
        units = self._units()
        threads = _threads()
        chunks = max(1, min(-(-len(data) // _MIN_QUERY_ROWS), -(-4 * threads // len(units))))
        bounds = np.linspace(0, len(data), chunks + 1).round().astype(int)
        parts = [broadcast(np.ascontiguousarray(data[a:b])) for a, b in zip(bounds[:-1],
                                                                             bounds[1:])]
        return parts, False, np.diff(bounds), None

    def _units(self):
        """(persisted object, first-row offsets of its blocks, is a group) per search task."""
        train, off = self._training()
        g = train.groups
        if g is not None:
            return [(g.objects[i], off[g.bounds[i]:g.bounds[i + 1]], True)
                    for i in range(len(g.objects))]
        return [(part, off[i:i + 1], False) for i, part in enumerate(train.parts)]

    def _search(self, X, k, with_y, finish, *finish_args, self_arg=False):
        """One Delayed ``finish(merged, *finish_args[, self_start])`` per query part, plus
        whether the output is Dask and the rows per part."""
        parts, dask_out, rows, starts = self._query_parts(X)
        units = self._units()
        metric, p = self.effective_metric_, float(self.effective_metric_params_.get("p", 2.0))
        name = new_name("search-unit")
        deps: list = []
        layer = {}
        unit_refs = [task_ref(obj, deps) for obj, _, _ in units]
        for q, part in enumerate(parts):
            qref = task_argument(part, deps)
            for u, (_, offsets, is_group) in enumerate(units):
                key = (name, q, u)
                layer[key] = Task(key, kern.search_unit, qref, unit_refs[u], is_group, offsets, k,
                                  metric, p, with_y)
        graph = layer_graph(name, layer, deps)
        outs = []
        for q in range(len(parts)):
            merged = tree_reduce([Delayed((name, q, u), graph, layer=name)
                                  for u in range(len(units))], kern.merge_results)
            extra = (starts[q],) if self_arg else ()
            outs.append(merged if finish is None else
                        map_delayed(finish, [merged], *finish_args, *extra)[0])
        return outs, dask_out, rows

    def _assemble(self, outs, dask_out, rows, tails, dtypes, n_outputs=1):
        """The per-part results as NumPy (local query) or lazy Dask arrays, one per output."""
        if not dask_out:
            computed = dask.compute(*outs)
            if n_outputs == 1:
                return np.concatenate(computed)
            return tuple(np.concatenate([c[i] for c in computed]) for i in range(n_outputs))
        results = []
        for i in range(n_outputs):
            pieces = outs if n_outputs == 1 else map_delayed(operator.getitem, outs, i)
            arrays = [da.from_delayed(piece, shape=(int(rows[j]) if rows is not None else np.nan,
                                                    *tails[i]), dtype=dtypes[i])
                      for j, piece in enumerate(pieces)]
            results.append(da.concatenate(arrays) if len(arrays) > 1 else arrays[0])
        return results[0] if n_outputs == 1 else tuple(results)

    def _n_queries(self, X):
        if X is None:
            return self.n_samples_fit_
        shape = getattr(X, "shape", None)
        if isinstance(X, (np.ndarray, da.Array)) and len(shape) and not np.isnan(shape[0]):
            return int(shape[0])
        return None


def _threads() -> int:
    from dml._block_groups import default_n_tasks

    return default_n_tasks()


class KNeighborsMixin:
    """``kneighbors`` and ``kneighbors_graph``."""

    def kneighbors(self, X: ArrayLike | None = None, n_neighbors: int | None = None,
                   return_distance: bool = True) -> Any:
        """The k nearest training rows of each query row, by exact brute force.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame, default=None
            Query rows, shape (n_queries, n_features). None: the training rows, each without
            itself as a neighbour.
        n_neighbors : int, default=None
            Neighbours per row (default: the ``n_neighbors`` parameter).
        return_distance : bool, default=True
            Also return the distances.

        Returns
        -------
        neigh_dist : ndarray or dask.array.Array of shape (n_queries, n_neighbors)
            Distances, ascending per row (only with ``return_distance``).
        neigh_ind : ndarray or dask.array.Array of shape (n_queries, n_neighbors)
            Training-row indices; equally distant rows in increasing index order. NumPy for
            local input, lazy Dask arrays (chunked like the query rows) for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import NearestNeighbors
        >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
        >>> nn = NearestNeighbors(n_neighbors=2).fit(X)
        >>> dist, ind = nn.kneighbors([[0.9, 0.0]])
        >>> ind, dist.round(2)
        (array([[1, 0]]), array([[0.1, 0.9]]))
        """
        check_is_fitted(self, "n_samples_fit_")
        extra = 1 if X is None else 0
        k = self._check_k(n_neighbors, extra, self._n_queries(X))
        m = k - extra
        args = (self.effective_metric_, float(self.effective_metric_params_.get("p", 2.0)),
                bool(return_distance))
        if X is None:
            outs, dask_out, rows = self._search(None, k, False, kern.finish_kneighbors, *args,
                                                self_arg=True)
        else:
            outs, dask_out, rows = self._search(X, k, False, kern.finish_kneighbors, *args, None)
        if return_distance:
            return self._assemble(outs, dask_out, rows, [(m,), (m,)], [np.float64, np.int64],
                                  n_outputs=2)
        return self._assemble(outs, dask_out, rows, [(m,)], [np.int64])

    def kneighbors_graph(self, X: ArrayLike | None = None, n_neighbors: int | None = None,
                         mode: str = "connectivity") -> Any:
        """The k-neighbours graph as a SciPy CSR matrix (local output only).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            Query rows (None: the training rows, without themselves).
        n_neighbors : int, default=None
        mode : {"connectivity", "distance"}, default="connectivity"
            Entries are ones or distances.

        Returns
        -------
        scipy.sparse.csr_matrix of shape (n_queries, n_samples_fit)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.neighbors import NearestNeighbors
        >>> nn = NearestNeighbors(n_neighbors=1).fit(np.array([[0.0], [1.0], [3.0]]))
        >>> nn.kneighbors_graph(np.array([[0.9]])).toarray()
        array([[0., 1., 0.]])
        """
        import scipy.sparse as sp

        if mode not in ("connectivity", "distance"):
            raise ValueError(f'Unsupported mode, must be one of "connectivity", or "distance" '
                             f'but got "{mode}" instead')
        dist, ind = self.kneighbors(X, n_neighbors, return_distance=True)
        if isinstance(ind, da.Array):
            dist, ind = dask.compute(dist, ind)
        n_q, m = ind.shape
        data = np.ones(n_q * m) if mode == "connectivity" else dist.ravel()
        return sp.csr_matrix((data, ind.ravel(), np.arange(0, n_q * m + 1, m)),
                             shape=(n_q, self.n_samples_fit_))


class KNeighborsPredictorBase(KNeighborsMixin, NeighborsBase):
    """What the k-neighbours classifier and regressor share: parameters, the prediction driver
    and scoring over the blocks. Subclasses give the per-chunk ``finish`` function and the
    metric of ``score``."""

    _parameter_constraints = {**NeighborsBase._parameter_constraints,
                              "weights": [StrOptions({"uniform", "distance"}), callable, None]}

    def __init__(self, n_neighbors=5, *, weights="uniform", metric="minkowski", p=2):
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.metric = metric
        self.p = p

    def _predict_from_neighbours(self, X, fitted_attr, finish, finish_args, tails, dtypes):
        """Run ``finish(res, metric, p, weights, *finish_args)`` on the k nearest training rows
        of every query chunk and assemble the outputs (NumPy, or lazy Dask for Dask input)."""
        check_is_fitted(self, fitted_attr)
        k = self._check_k(None, 0, self._n_queries(X))
        outs, dask_out, rows = self._search(
            X, k, True, finish, self.effective_metric_,
            float(self.effective_metric_params_.get("p", 2.0)), self.weights, *finish_args)
        return self._assemble(outs, dask_out, rows, tails, dtypes)

    def _score_with(self, metric, X, y, sample_weight):
        """scikit-learn's ``score`` for local input; ``metric`` of :mod:`dml.metrics`, reduced
        over the blocks, when any argument is a Dask collection."""
        from dml.base import is_dask

        if not (is_dask(X) or is_dask(y) or is_dask(sample_weight)):
            return super().score(X, y, sample_weight=sample_weight)
        return float(metric(y, self.predict(X), sample_weight=sample_weight))
