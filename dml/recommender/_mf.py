"""Matrix factorisation r̂_ui = μ + b_u + b_i + p_u·q_i by DSGD or ALS on Dask.

Layout of a fit
---------------
1. *Id pass*: every partition returns its sorted unique user and item ids, rating sum and count;
   these are merged in partition order into sorted id tables (``user_ids_``, ``item_ids_``) and
   the global mean μ. Arbitrary ids (integers or strings) map to dense indices by binary search.
2. *Cells* (:mod:`dml.recommender._cells`): users are split into B contiguous index ranges and items
   into B; each partition splits its ratings into the B×B (user-block, item-block) cells, and one
   task per cell gathers its pieces and sorts them by (user, item), so a cell's content does not
   depend on how the input was partitioned or on how many workers there are. Cells stay on the
   workers when they fit (``persist``). Otherwise (data larger than the cluster's memory) every
   partition writes its pieces to files under ``spill_dir``, one task per cell merges them into one
   sorted cell file, and from then on tasks receive cell *paths* and read the one cell they work on:
   the same arrays in the same order, so the same model bit for bit, with no cell held in memory
   between tasks.
3. *Epochs* run through :func:`dml.optim.training.run_epochs` (history, checkpoints, progress),
   each one the ``epoch`` of a solver object of :mod:`dml.recommender._solvers`:
   ``DSGDSolver`` (distributed SGD over the cells, its step size adapted by the bold driver)
   or ``ALSSolver`` (alternating least squares, weighted-λ by default). That module's docstring
   describes both methods and the objective they share.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile

import dask
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from dml._blocks import block_rng, is_dask, seed_from
from dml._param_validation import Integral, Interval, Real, StrOptions, invalid_parameter
from dml._typing import Any, ArrayLike, Self
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.optim.data import fits_persist_budget, worker_memory
from dml.optim.params import TRAINING
from dml.optim.state import TrainState
from dml.optim.training import TrainConfig, run_epochs
from dml.recommender._cells import (as_ids, bounds, build_cells, id_stats, lookup, merge_stats,
                                    predict_frame, val_partition)
from dml.recommender._frames import _array_frame, _predict_array, _predict_series, _rename
from dml.recommender._solvers import EPOCHS_PER_SUBMIT, ALSSolver, DSGDSolver, sq_val
from dml.worker_setup import entries, prepare

__all__ = ["MatrixFactorization"]

_SOLVERS = ("sgd", "als")
#: Worker memory a persisted fit holds per rating: the cells (two int64 indices and a float64
#: rating) and the seen pairs' int64 item indices.
_PERSIST_BYTES_PER_RATING = 32
#: Bytes per rating of a cell while it is merged and sorted (the out-of-core path's peak).
_SORT_BYTES_PER_RATING = 72
#: Out of core, a cell may take at most this fraction of a worker's limit...
_CELL_FRACTION = 0.3
#: ... and at most this fraction of the limit less what the worker already holds (its process
#: memory: ~285 MiB with dml imported, ~440 MiB once the forest and boosting kernels are
#: compiled, measured), so that sorting a cell keeps the worker below Dask's pause threshold
#: (80%): a worker over it pauses, and at 95% its nanny kills it.
_CELL_CEILING = 0.75


def _tightest_worker() -> tuple[int, int, int] | None:
    """(cell budget, memory limit, process memory) in bytes of the current cluster's worker
    with the smallest cell budget, ``min(0.3 * limit, 0.75 * limit - process memory)``; None
    without a cluster or memory limits (no check)."""
    workers = worker_memory()
    if not workers:
        return None
    return min((int(min(_CELL_FRACTION * limit, _CELL_CEILING * limit - process)), limit, process)
               for limit, process in workers)


def cell_budget() -> int | None:
    """Bytes one out-of-core cell may take while it is sorted, on the tightest worker of the
    current cluster (see :func:`_tightest_worker`); None: no limit. A fit takes it at its start,
    before its own tasks run, so that :func:`min_n_blocks` called just before the fit gives
    the fit's answer."""
    tightest = _tightest_worker()
    return None if tightest is None else tightest[0]


def min_n_blocks(n: int, budget: int | None = None) -> int | None:
    """The smallest ``n_blocks`` whose cells of ``n`` ratings fit ``budget`` bytes (default:
    the current cluster's :func:`cell_budget`) when the fit runs out of core; None when there
    is no limit, or no room at all (a budget of zero or less, which the fit refuses)."""
    budget = cell_budget() if budget is None else budget
    if budget is None or budget <= 0:
        return None
    return max(1, math.ceil(math.sqrt(_SORT_BYTES_PER_RATING * n / budget)))


def _check_cell_size(n: int, B: int, tightest: tuple[int, int, int] | None) -> None:
    """Out of core, one task holds a whole cell: refuse a ``n_blocks`` whose cells cannot fit
    the ``tightest`` worker (:func:`_tightest_worker`; it would be paused or killed for memory,
    mid-fit) and say which ``n_blocks`` would."""
    if tightest is None:
        return
    budget, limit, process = tightest
    need = _SORT_BYTES_PER_RATING * n / B ** 2
    if need <= budget:
        return
    head = (f"MatrixFactorization: the {n:,} ratings do not fit the workers' memory, so the fit "
            "runs out of core, one (user block, item block) cell per task; the tightest worker "
            f"has a {limit / 2**20:,.0f} MiB limit and already holds {process / 2**20:,.0f} MiB "
            "(imported modules, compiled kernels, data and heap of earlier work)")
    if budget <= 0:
        raise ValueError(
            f"{head}, which leaves no room for a cell below Dask's pause threshold. Restart the "
            "workers (client.restart()) or use workers with more memory.")
    raise ValueError(
        f"{head}. With n_blocks={B} a cell needs about {need / 2**20:,.0f} MiB while it is "
        f"sorted, more than the {budget / 2**20:,.0f} MiB a cell may take (the smaller of "
        f"{_CELL_FRACTION:.0%} of the limit and {_CELL_CEILING:.0%} of it less what the worker "
        f"holds). Use n_blocks >= {min_n_blocks(n, budget)} (the model depends on n_blocks), "
        "or workers with more memory.")


# ---------------------------------------------------------------- the estimator
class MatrixFactorization(DaskEstimatorMixin, RegressorMixin, BaseEstimator):
    """Matrix factorisation of explicit ratings by distributed SGD (DSGD) or ALS.

    Parameters
    ----------
    n_factors : int, default=10
        Rank k of P (users × k) and Q (items × k).
    solver : {"sgd", "als"}, default="sgd"
        See the module docstring of :mod:`dml.recommender._mf` for both algorithms.
    biases : bool, default=True
        Learn b_u and b_i. Without biases the model is r̂ = p_u·q_i (no global mean either, as
        Spark's ALS), so an exactly rank-k matrix is representable.
    reg : float, default=0.1
        λ, the L2 penalty. SGD applies it at every rating it visits, so a user with n_u
        ratings is penalised by λ n_u; ALS scales it the same way (weighted-λ, as Spark's
        ``regParam``) unless ``weighted_reg=False``. One ``reg`` thus means the same
        objective for both solvers.
    weighted_reg : bool, default=True
        ALS only. True: penalty λ n_u per user and λ n_i per item (Spark's scaling, ``reg`` of
        order 0.1). False: λ for every user and item, the loss of docs/recommender.md as written
        (``reg`` of order 10 on 1–5 star ratings); rarely rated items are then shrunk towards
        μ + b_u, which makes top-k lists far better (see Notes).
    learning_rate : float, default=0.05
        SGD only: the initial step η₀. Epoch e (0-based) uses ``η₀ · g_e / (1 + lr_decay · e)``
        where g_e is the bold driver's gain (below).
    lr_decay : float, default=0.0
    bold_driver : bool, default=True
        SGD only: adapt the step after every epoch, × 1.05 when the training objective fell
        and × 0.5 when it rose (Gemulla et al. 2011). Lets a large initial step cross the
        flat start of training quickly and still settle; ``False`` keeps η₀ (with
        ``lr_decay``) whatever happens.
    n_epochs : int, default=20
        SGD epochs or ALS iterations (one user step and one item step).
    n_blocks : int, default=4
        B: users and items are split into B blocks each (B² cells). The fitted model depends on
        B, not on the number of workers.
    init_std : float, default=0.1
        Standard deviation of the normal initial factors (ALS initialises Q only).
    user_col, item_col, rating_col : str
        Column names in DataFrame input.
    tol, n_iter_no_change : stopping rule on the training objective (tol=None: run n_epochs).
    checkpoint_dir, checkpoint_every, verbose, progress, callbacks : see :mod:`dml.optim`.
    persist : {"auto", True, False}, default="auto"
        Keep the B² (user block, item block) cells in the workers' memory between tasks.
        ``"auto"``: when they fit half of the cluster's memory (32 bytes per rating: the cells
        and the seen pairs). Otherwise the fit runs *out of core*: every input partition writes
        its cell pieces to files under ``spill_dir``, one task per cell merges them into one
        sorted cell file, and each SGD sub-epoch task, ALS step and RMSE pass reads the cells it
        needs from there. The model is identical bit for bit either way. Out of core a task
        holds one cell, about ``24 · n_ratings / n_blocks²`` bytes (some three times that while
        a cell is sorted), so raise ``n_blocks`` until that is small next to a worker's memory:
        the fit refuses, before writing any cell, an ``n_blocks`` whose sorted cell would take
        more than 30% of a worker's memory limit, or more than 75% of it less what the worker
        already holds when the fit starts (imported modules, compiled kernels, earlier data),
        and names the smallest ``n_blocks`` that fits.
    spill_dir : str or path-like, optional
        Where the out-of-core cell files go (unused when the cells are persisted): ``fit``
        creates a fresh subdirectory in it and removes it at the end, also when the fit fails.
        Default: the client's ``tempfile.gettempdir()``. It needs about as much free space as
        the ratings take in memory (24 bytes per rating), and the client and every worker must
        see it at the same path: any local directory when they all run on one machine; on a
        multi-node cluster a shared filesystem (NFS, a mounted volume), or ``fit`` fails with an
        error naming the directory.
    remember_seen : {"auto", True, False}, default="auto"
        Keep every training (user, item) pair on the client (``seen_indptr_``,
        ``seen_items_``: 8 bytes per rating) so that ``recommend(exclude_seen=True)`` can skip a
        user's rated items. ``"auto"``: when the ratings fit the same budget as
        ``persist="auto"``; for larger data they are not kept and ``recommend`` needs
        ``exclude_seen=False`` (or a refit with ``remember_seen=True``, which out of core reads
        them from the cell files, one user block of pairs per task).
    random_state : int, RandomState or None

    Attributes
    ----------
    user_ids_, item_ids_ : ndarray
        Sorted distinct ids seen in fit; row j of ``user_factors_`` belongs to ``user_ids_[j]``.
    user_factors_, item_factors_ : ndarray of shape (n, k)
    user_bias_, item_bias_ : ndarray
    global_mean_ : float
    seen_indptr_, seen_items_ : ndarray or None
        The training items of each user (CSR, item indices), for ``recommend(exclude_seen=True)``;
        None when they were not kept (see ``remember_seen``).
    history_ : list of dict
        Per epoch: objective, train_rmse, validation_rmse (with validation_data), seconds.
        DSGD submits its epochs to the cluster in chains (see docs/recommender.md); the first
        epoch of a chain carries the whole chain's seconds.

    Notes
    -----
    Both solvers minimise squared rating error, not a ranking loss, and ``recommend`` sorts by
    predicted rating; top-k lists therefore favour items with few but high ratings. ALS is the
    extreme case because its λ is weighted by the number of ratings: an item with n_i ratings is
    penalised by λ n_i, so relative to its data every item is shrunk equally and an item rated
    once, 5 stars, keeps a bias near 5 − μ − b_u. On MovieLens small (random 80/20 split, seed
    0, rank 10; ALS ``reg=0.1``, 5 iterations; SGD ``learning_rate=0.02, reg=0.05,
    bold_driver=False``, 8 epochs; held-out ratings ≥ 4 relevant, 594 users), both reach a
    held-out RMSE of 0.868, but precision@10 of ``recommend(users, k=10)`` is 0.0007 for ALS
    (the recommended items have a median of 2 training ratings) and 0.015 for SGD (median 18;
    few SGD steps touch a rare item, which acts as extra shrinkage). The bias-only model scores
    0.0002, the most-popular list 0.117. This is the model, not a fault: ``recommend`` equals
    the NumPy ranking of the fitted arrays, and ALS equals a plain NumPy ALS of the same
    objective to 1e-13. A larger weighted ``reg`` does not help (0.0002 at ``reg=1``).
    ``weighted_reg=False, reg=20`` (λ per user and item, the loss of docs/recommender.md as written)
    shrinks the rare items: RMSE 0.861, precision@10 0.107 (median 160 training ratings per
    recommended item; 10 iterations: 0.858 and 0.109). For top-k use prefer it, or filter out rarely
    rated items.

    Examples
    --------
    >>> import pandas as pd
    >>> from dml.recommender import MatrixFactorization
    >>> df = pd.DataFrame({"user": [1, 1, 2, 2, 3], "item": ["a", "b", "a", "c", "b"],
    ...                    "rating": [5.0, 3.0, 4.0, 2.0, 1.0]})
    >>> mf = MatrixFactorization(n_factors=2, n_epochs=5, n_blocks=2, random_state=0).fit(df)
    >>> mf.predict(pd.DataFrame({"user": [1, 99], "item": ["c", "zzz"]})).shape
    (2,)
    >>> items, scores = mf.recommend([2], k=1)
    >>> str(items[0, 0])
    'b'

    Out of core (forced here with ``persist=False``; ``"auto"`` does it for data larger than
    half the cluster's memory) the cells are read from files, and the model is the same:

    >>> ooc = MatrixFactorization(n_factors=2, n_epochs=5, n_blocks=2, random_state=0,
    ...                           persist=False).fit(df)
    >>> bool((ooc.user_factors_ == mf.user_factors_).all())
    True
    """

    def __init__(self, n_factors=10, *, solver="sgd", biases=True, reg=0.1, weighted_reg=True,
                 learning_rate=0.05, lr_decay=0.0, bold_driver=True, n_epochs=20, n_blocks=4,
                 init_std=0.1, user_col="user", item_col="item", rating_col="rating", tol=None,
                 n_iter_no_change=5, checkpoint_dir=None, checkpoint_every=1, verbose=0,
                 progress=None, callbacks=(), persist="auto", spill_dir=None,
                 remember_seen="auto", random_state=None):
        self.n_factors = n_factors
        self.solver = solver
        self.biases = biases
        self.reg = reg
        self.weighted_reg = weighted_reg
        self.learning_rate = learning_rate
        self.lr_decay = lr_decay
        self.bold_driver = bold_driver
        self.n_epochs = n_epochs
        self.n_blocks = n_blocks
        self.init_std = init_std
        self.user_col = user_col
        self.item_col = item_col
        self.rating_col = rating_col
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.verbose = verbose
        self.progress = progress
        self.callbacks = callbacks
        self.persist = persist
        self.spill_dir = spill_dir
        self.remember_seen = remember_seen
        self.random_state = random_state

    # ---- input
    _parameter_constraints = {
        "n_factors": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions(set(_SOLVERS))],
        "biases": ["boolean"],
        "reg": [Interval(Real, 0, None, closed="left")],
        "weighted_reg": ["boolean"],
        "bold_driver": ["boolean"],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "lr_decay": [Interval(Real, 0, None, closed="left")],
        "n_epochs": [Interval(Integral, 1, None, closed="left")],
        "n_blocks": [Interval(Integral, 1, None, closed="left")],
        "init_std": [Interval(Real, 0, None, closed="left")],
        "user_col": "no_validation", "item_col": "no_validation", "rating_col": "no_validation",
        **{n: TRAINING[n].constraints for n in ("tol", "n_iter_no_change", "checkpoint_dir",
                                                "checkpoint_every", "verbose", "progress",
                                                "callbacks", "persist", "random_state")},
        "spill_dir": [str, os.PathLike, None],
        "remember_seen": [StrOptions({"auto"}), "boolean"],
    }

    def _validate_param_relations(self):
        if self.spill_dir is not None and not os.path.isdir(self.spill_dir):
            raise invalid_parameter(self, "spill_dir", "an existing directory (create it) or "
                                    "None (a temporary directory under "
                                    f"{tempfile.gettempdir()!r})")

    def _partitions(self, X, y, *, need_rating=True, what="X"):
        """Input as a list of (delayed or local) pandas frames with columns u, i[, r]."""
        cols = [self.user_col, self.item_col]
        if isinstance(X, tuple) and len(X) in (2, 3) and y is None:
            X = pd.DataFrame(dict(zip(["u", "i", "r"], [np.asarray(a) for a in X])))
            return [X] if (not need_rating or "r" in X) else self._no_rating(what)
        if is_dask(X) and hasattr(X, "columns"):
            rating = y if isinstance(y, str) else self.rating_col
            want = cols + ([rating] if need_rating else [])
            self._check_columns(X.columns, want, what)
            if y is not None and not isinstance(y, str):
                raise TypeError("with a Dask DataFrame, give the ratings as a column of it "
                                f"(rating_col={self.rating_col!r} or y='<column name>')")
            sub = X[want]
            return [dask.delayed(_rename)(p, want) for p in sub.to_delayed()]
        if isinstance(X, pd.DataFrame):
            rating = y if isinstance(y, str) else self.rating_col
            if y is not None and not isinstance(y, str):
                X = X.assign(**{rating: np.asarray(y)})
            want = cols + ([rating] if need_rating else [])
            self._check_columns(X.columns, want, what)
            return [_rename(X[want], want)]
        if is_dask(X) and getattr(X, "ndim", 0) == 2 and X.shape[1] in (2, 3):
            # A Dask array of (user, item[, rating]) columns, y a Dask array of ratings.
            X = X.rechunk({1: -1})
            xs = X.to_delayed().ravel().tolist()
            if need_rating and X.shape[1] == 2:
                if y is None or not is_dask(y):
                    self._no_rating(what)
                ys = y.rechunk((X.chunks[0],)).to_delayed().ravel().tolist()
            else:
                ys = [None] * len(xs)
            return [dask.delayed(_array_frame)(a, b, need_rating) for a, b in zip(xs, ys)]
        if is_dask(X):
            raise TypeError(f"{what}: pass a Dask DataFrame with columns {cols} (and "
                            f"{self.rating_col!r}), not a {type(X).__name__}")
        arr = np.asarray(X)
        if arr.ndim != 2 or arr.shape[1] not in (2, 3):
            raise ValueError(f"{what} must be a DataFrame with columns {cols} (and "
                             f"{self.rating_col!r}) or an array of (user, item) columns; got "
                             f"shape {arr.shape}")
        frame = {"u": arr[:, 0], "i": arr[:, 1]}
        if need_rating:
            if y is None and arr.shape[1] == 3:
                frame["r"] = arr[:, 2].astype(np.float64)
            elif y is None:
                self._no_rating(what)
            else:
                frame["r"] = np.asarray(y, dtype=np.float64)
                if len(frame["r"]) != len(arr):
                    raise ValueError(f"{what} has {len(arr)} rows but y has {len(frame['r'])}")
        return [pd.DataFrame(frame)]

    def _no_rating(self, what):
        raise ValueError(f"{what}: no ratings given; pass y or a {self.rating_col!r} column")

    @staticmethod
    def _check_columns(columns, want, what):
        missing = [c for c in want if c not in set(columns)]
        if missing:
            raise ValueError(f"{what} has no column(s) {missing}; its columns are {list(columns)}."
                             " Set user_col/item_col/rating_col to the names in your data.")

    # ---- fit
    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None, *,
            validation_data: Any | None = None) -> Self:
        """Fit on (user, item, rating) triples.

        Parameters
        ----------
        X : DataFrame (pandas or Dask) with ``user_col``, ``item_col``, ``rating_col``; or an
            array of (user, item[, rating]) columns; or a tuple (users, items, ratings).
        y : array-like or str, optional
            Ratings (or the name of the rating column).
        validation_data : same forms as X, optional
            Held-out ratings; their RMSE is recorded per epoch as ``validation_rmse``.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.recommender import MatrixFactorization
        >>> df = pd.DataFrame({"user": [1, 1, 2, 2, 3], "item": ["a", "b", "a", "c", "b"],
        ...                    "rating": [5.0, 3.0, 4.0, 2.0, 1.0]})
        >>> MatrixFactorization(n_factors=2, n_blocks=2, random_state=0).fit(df).user_factors_.shape
        (3, 2)
        """
        parts = self._partitions(X, y)
        # What the workers hold before this fit's own tasks run (see cell_budget).
        tightest = None if self.persist is True else _tightest_worker()
        # Compiled once across the cluster before the first task needs them (a fresh worker
        # would otherwise compile each kernel on the fit's critical path).
        used = {"_sort_short_runs", "sq_error_cell",
                "als_gram_add" if self.solver == "als" else "sgd_cell"}
        prepare(entries("recommender", lambda name, sig: name in used))
        seed = seed_from(self.random_state)
        B = int(self.n_blocks)
        stats = [dask.delayed(id_stats)(p) for p in parts]
        users, items, total, n = dask.compute(dask.delayed(merge_stats)(stats))[0]
        if n == 0:
            raise ValueError("no ratings to fit on")
        self.user_ids_, self.item_ids_ = users, items
        nu, ni = len(users), len(items)
        mu = float(total / n) if self.biases else 0.0
        ub, ib = bounds(nu, B), bounds(ni, B)
        fits = fits_persist_budget(n * _PERSIST_BYTES_PER_RATING)
        persist = fits if self.persist == "auto" else bool(self.persist)
        remember = fits if self.remember_seen == "auto" else bool(self.remember_seen)
        spill = None
        if not persist:
            _check_cell_size(n, B, tightest)
            base = None if self.spill_dir is None else os.path.abspath(self.spill_dir)
            spill = tempfile.mkdtemp(prefix="dml-mf-", dir=base)
        try:
            return self._fit_cells(parts, validation_data, seed, B, users, items, n, mu, ub, ib,
                                   spill, remember)
        finally:
            if spill is not None:
                shutil.rmtree(spill, ignore_errors=True)

    def _fit_cells(self, parts, validation_data, seed, B, users, items, n, mu, ub, ib, spill,
                   remember):
        """The fit after the id pass: the cells, then the epochs of the solver."""
        nu, ni = len(users), len(items)
        cells, val, n_u, n_i, seen = build_cells(
            parts, self._validation_parts(validation_data, users, items), users, items, ub, ib,
            spill, remember)
        if remember:
            self.seen_indptr_ = np.concatenate(
                [[0], np.cumsum(np.concatenate([s[0] for s in seen]))])
            self.seen_items_ = np.concatenate([s[1] for s in seen]).astype(np.int64)
        else:
            self.seen_indptr_ = self.seen_items_ = None

        k = int(self.n_factors)
        rng = block_rng(seed, "mf/init")
        P = rng.normal(0.0, self.init_std, (nu, k))
        Q = rng.normal(0.0, self.init_std, (ni, k))
        common = dict(ub=ub, ib=ib, n_u=n_u, n_i=n_i, n=n, mu=mu, seed=seed, reg=self.reg,
                      use_bias=self.biases)
        if self.solver == "als":
            P[:] = 0.0  # ALS starts with the user step, which does not read P
            solver = ALSSolver(cells, val, weighted=self.weighted_reg, **common)
        else:
            # Epochs chain on the cluster, except where the client needs every epoch's factors:
            # callbacks and the tol rule may end the fit after any epoch, and out of core the
            # held-out rows would stay in the workers' memory for a whole chain.
            per_epoch = bool(self.callbacks) or self.tol is not None or (
                spill is not None and val is not None)
            solver = DSGDSolver(
                cells, val, learning_rate=self.learning_rate, lr_decay=self.lr_decay,
                bold_driver=self.bold_driver, epochs_per_submit=1 if per_epoch else
                EPOCHS_PER_SUBMIT, max_iter=int(self.n_epochs),
                checkpoint_every=self.checkpoint_every if self.checkpoint_dir else None,
                **common)
        state = TrainState(params=np.zeros(0), seed=seed, arrays={
            "P": P, "Q": Q, "bu": np.zeros(nu), "bi": np.zeros(ni)})
        config = TrainConfig(
            max_iter=int(self.n_epochs), tol=self.tol, n_iter_no_change=self.n_iter_no_change,
            checkpoint_dir=self.checkpoint_dir, checkpoint_every=self.checkpoint_every,
            verbose=self.verbose, progress=self.progress, callbacks=self.callbacks,
            name=type(self).__name__,
            lr_hint=f"learning_rate={self.learning_rate}" if self.solver == "sgd" else "")
        fingerprint = {"estimator": type(self).__name__, "n_ratings": int(n), "n_users": nu,
                       "n_items": ni, "mean": mu,
                       **{k: v for k, v in self.get_params().items()
                          if k in ("n_factors", "solver", "biases", "reg", "learning_rate",
                                   "lr_decay", "n_blocks", "init_std")}}
        # Only when off the default, so checkpoints written before these options still resume.
        if not self.weighted_reg:
            fingerprint["weighted_reg"] = False
        if self.solver == "sgd" and not self.bold_driver:
            fingerprint["bold_driver"] = False
        state = run_epochs(state, solver.epoch, config, fingerprint=fingerprint)
        A = state.arrays
        self.user_factors_, self.item_factors_ = A["P"], A["Q"]
        self.user_bias_, self.item_bias_ = A["bu"], A["bi"]
        self.global_mean_ = mu
        self.n_ratings_ = int(n)
        self.history_ = state.history
        self.n_iter_ = state.epoch
        self.stop_reason_ = state.stop_reason
        return self

    def _validation_parts(self, validation_data, users, items):
        """The held-out ratings as delayed (u, i, r) parts of dense indices, or None."""
        if validation_data is None:
            return None
        d_users, d_items = dask.delayed(users, pure=True), dask.delayed(items, pure=True)
        return [dask.delayed(val_partition, pure=True)(p, d_users, d_items)
                for p in self._partitions(validation_data, None, what="validation_data")]

    # ---- predict
    def _model(self):
        return (self.user_ids_, self.item_ids_, self.user_factors_, self.item_factors_,
                self.user_bias_, self.item_bias_, self.global_mean_)

    def predict(self, X: ArrayLike) -> Any:
        """Predicted ratings for (user, item) pairs; unknown ids get μ plus any known bias.

        Parameters
        ----------
        X : DataFrame (pandas or Dask), or array of (user, item) columns
            The pairs to rate: a DataFrame needs the ``user_col`` and ``item_col`` columns.

        Returns
        -------
        ratings : ndarray or dask.array.Array of shape (n_pairs,)
            NumPy for NumPy/pandas input, a lazy Dask array for Dask input.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.recommender import MatrixFactorization
        >>> df = pd.DataFrame({"user": [1, 1, 2, 2, 3], "item": ["a", "b", "a", "c", "b"],
        ...                    "rating": [5.0, 3.0, 4.0, 2.0, 1.0]})
        >>> mf = MatrixFactorization(n_factors=2, n_epochs=5, n_blocks=2, random_state=0).fit(df)
        >>> mf.predict(pd.DataFrame({"user": [1, 99], "item": ["c", "a"]})).shape
        (2,)
        """
        check_is_fitted(self, "user_factors_")
        uids, iids, P, Q, bu, bi, mu = self._model()
        if is_dask(X) and hasattr(X, "columns"):
            self._check_columns(X.columns, [self.user_col, self.item_col], "X")
            meta = pd.Series([], dtype=np.float64)
            out = X.map_partitions(_predict_series, self.user_col, self.item_col, uids, iids,
                                   P, Q, bu, bi, mu, meta=meta)
            return out.to_dask_array()
        if is_dask(X) and getattr(X, "ndim", 0) == 2:
            if X.shape[1] not in (2, 3):
                raise ValueError(f"X must have (user, item) columns; got {X.shape[1]} columns")
            return X.rechunk({1: -1}).map_blocks(_predict_array, uids, iids, P, Q, bu, bi, mu,
                                                 drop_axis=1, dtype=np.float64)
        frames = self._partitions(X, None, need_rating=False)
        df = frames[0]
        return predict_frame(df, "u", "i", uids, iids, P, Q, bu, bi, mu)

    def score(self, X: ArrayLike, y: ArrayLike | None = None) -> float:
        """Negative RMSE on (user, item, rating) rows (higher is better, like scikit-learn).

        Parameters
        ----------
        X : DataFrame (pandas or Dask), array or tuple
            Ratings in the forms :meth:`fit` accepts.
        y : array-like or str, default=None
            Ratings (or the name of the rating column), as in :meth:`fit`.

        Returns
        -------
        score : float
            Minus the root mean squared error of the predicted ratings.

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.recommender import MatrixFactorization
        >>> df = pd.DataFrame({"user": [1, 1, 2, 2, 3], "item": ["a", "b", "a", "c", "b"],
        ...                    "rating": [5.0, 3.0, 4.0, 2.0, 1.0]})
        >>> mf = MatrixFactorization(n_factors=2, n_epochs=5, n_blocks=2, random_state=0).fit(df)
        >>> mf.score(df) < 0
        True
        """
        check_is_fitted(self, "user_factors_")
        uids, iids, P, Q, bu, bi, mu = self._model()
        parts = self._partitions(X, y)
        vals = [dask.delayed(sq_val)(dask.delayed(val_partition)(p, uids, iids),
                                      P, Q, bu, bi, mu) for p in parts]
        vals = dask.compute(vals)[0]
        return -math.sqrt(math.fsum(v[0] for v in vals) / max(sum(v[1] for v in vals), 1))

    def recommend(self, users: ArrayLike, k: int = 10, *, exclude_seen: bool = True) -> Any:
        """Top-k items per user by predicted rating.

        Unknown users are ranked by μ + b_i (the bias-only popularity). With ``exclude_seen``
        the user's training items are skipped; fewer than k candidates leave the row padded with
        ``None``-like fill (item id of the array's dtype default) and score ``-inf``.

        Parameters
        ----------
        users : array-like of shape (n_users,)
            User ids.
        k : int, default=10
            Items per user.
        exclude_seen : bool, default=True
            Skip the items each user rated in the training data.

        Returns
        -------
        items : ndarray of shape (n_users, k) of item ids
        scores : ndarray of shape (n_users, k)

        Raises
        ------
        ValueError
            With ``exclude_seen=True`` when the fit did not keep the training pairs
            (``remember_seen``).

        Examples
        --------
        >>> import pandas as pd
        >>> from dml.recommender import MatrixFactorization
        >>> df = pd.DataFrame({"user": [1, 1, 2, 2, 3], "item": ["a", "b", "a", "c", "b"],
        ...                    "rating": [5.0, 3.0, 4.0, 2.0, 1.0]})
        >>> mf = MatrixFactorization(n_factors=2, n_epochs=5, n_blocks=2, random_state=0).fit(df)
        >>> items, scores = mf.recommend([2], k=1)
        >>> items.shape, scores.shape
        ((1, 1), (1, 1))
        """
        check_is_fitted(self, "user_factors_")
        if not (isinstance(k, (int, np.integer)) and k >= 1):
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if exclude_seen and getattr(self, "seen_items_", None) is None:
            raise ValueError(
                "recommend(exclude_seen=True) needs every user's training items, which this "
                f"{type(self).__name__} did not keep (remember_seen={self.remember_seen!r}; "
                "'auto' keeps them only when the ratings fit half of the cluster's memory, as "
                "they take 8 bytes per rating in client memory, here "
                f"{8 * self.n_ratings_ / 2**20:.0f} MiB). Pass exclude_seen=False, or refit "
                "with remember_seen=True.")
        uids, iids, P, Q, bu, bi, mu = self._model()
        users = np.atleast_1d(np.asarray(users))
        idx = lookup(uids, as_ids(users)) if len(users) else np.zeros(0, dtype=np.int64)
        ni = len(iids)
        kk = min(int(k), ni)
        items = np.empty((len(users), kk), dtype=iids.dtype)
        scores = np.full((len(users), kk), -np.inf)
        for row, u in enumerate(idx):
            s = mu + bi.copy()
            if u >= 0:
                s += bu[u] + Q @ P[u]
                if exclude_seen:
                    s[self.seen_items_[self.seen_indptr_[u]:self.seen_indptr_[u + 1]]] = -np.inf
            # Ties broken by item index, so results are deterministic.
            top = np.lexsort((np.arange(ni), -s))[:kk]
            items[row] = iids[top]
            scores[row] = s[top]
        return items, scores
