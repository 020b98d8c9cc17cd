"""Fitting and scoring (candidate, fold) pairs concurrently on the cluster; cross-validation.

Two ways to run a batch of fits, chosen per search (:func:`run_fits`):

* **Tasks** (scikit-learn estimators and pipelines on in-memory data, with a distributed client):
  X and y are scattered to every worker once (``broadcast=True``) together with the fold
  indices; each (candidate, fold) fit is one ``client.submit`` task. For a ``Pipeline``, the
  steps before the final one are fitted once per (fold, prefix parameters) in a task of their
  own; the candidates that differ only in the final step's parameters start from that task's
  fitted prefix and transformed training rows.
* **Client threads** (dml estimators, or any Dask input): each fit is a driver loop that calls
  ``compute`` several times, so every (candidate, fold) fit runs in its own client thread against
  the same client; their graphs reach the scheduler together and their tasks interleave on the
  workers. Local input is first put on the workers once as a persisted Dask array. The rows of
  each fold are selected lazily (:func:`dml.model_selection.take_rows`) and, with
  ``persist_folds=True``, persisted once and shared by all candidates.
* **Stacked** (SGD estimators on Dask data): candidates that differ only in penalty weights or
  step-size constants (``alpha``, ``l1_ratio``, ``eta0``, ``power_t``) are trained together
  with every fold in one driver loop whose passes go over X itself: each block task runs the
  steps of every (candidate, fold) model on that fold's rows of the block
  (:mod:`dml.optim.stacked`). Each model ends as its own fit on ``take_rows(X, train)`` would
  (up to rounding); the scorings then run concurrently. Folds that need problems of their own
  (a fold without some class, ``class_weight="balanced"``) fall back to one stack per fold.

Without a distributed client the fits run one after another in this process (dml estimators then
use Dask's threaded scheduler). Results are collected in (candidate, fold) order and every fit
only depends on its data, parameters and ``random_state``, so they do not depend on the number
of workers or on which fit finished first.
"""
from __future__ import annotations

import logging
import sys
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from itertools import product

import dask.array as da
import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import FitFailedWarning
from sklearn.pipeline import Pipeline

from dml._blocks import check_x_layout, is_dask, is_sparse, sparse_blocks
from dml.model_selection._scoring import estimator_scorer, get_scorer, sklearn_name
from dml.model_selection._split import check_cv, n_rows, split_indices, take_rows

#: Searches log every finished fit here (at INFO).
_logger = logging.getLogger("dml.model_selection")

__all__ = ["cross_validate", "cross_val_score", "get_scorer", "check_scoring", "run_fits"]


# --------------------------------------------------------------------------------------------
# Scorers (the table of names is in _scoring)
# --------------------------------------------------------------------------------------------

def check_scoring(estimator, scoring, *, dask_path: bool):
    """``(scorers, multimetric)``: a dict name → scorer, or ``{"score": scorer}``.

    On the task path (scikit-learn estimators, local data) scikit-learn's own scorers are used;
    on the client-thread path dml's blockwise scorers. ``None`` means the estimator's ``score``
    as in scikit-learn (:func:`~dml.model_selection._scoring.estimator_scorer`: scikit-learn's
    default accuracy and R² are computed by :mod:`dml.metrics`, so Dask predictions are never
    gathered; any other ``score``, e.g. KMeans', is called as it is).
    """
    if dask_path:
        if scoring is None:
            return {"score": estimator_scorer(estimator)}, False
        make = get_scorer
    else:
        from sklearn.metrics import check_scoring as sk_check
        from sklearn.metrics import get_scorer as sk_get

        if scoring is None or callable(scoring):
            return {"score": sk_check(estimator, scoring=scoring)}, False

        def make(name):
            return sk_get(sklearn_name(name) if isinstance(name, str) else name)
    if isinstance(scoring, str) or callable(scoring):
        return {"score": make(scoring)}, False
    if isinstance(scoring, (list, tuple, set)):
        names = list(scoring)
        if not names or len(set(names)) != len(names) or not all(isinstance(s, str) for s in names):
            raise ValueError("scoring as a list must hold distinct scorer names, e.g. "
                             "['accuracy', 'neg_log_loss']")
        return {s: make(s) for s in names}, True
    if isinstance(scoring, dict):
        if not scoring:
            raise ValueError("scoring as a dict must not be empty")
        return {k: make(v) for k, v in scoring.items()}, True
    raise ValueError(f"scoring must be a string, a callable, a list of names or a dict, got "
                     f"{type(scoring).__name__}")


# --------------------------------------------------------------------------------------------
# One fit
# --------------------------------------------------------------------------------------------

def _score(scorers, estimator, X, y, error_score, score_params=None):
    """``score_params``: keyword arguments of every scorer, already cut to the rows of X."""
    out = {}
    kw = score_params or {}
    for name, scorer in scorers.items():
        try:
            value = scorer(estimator, X, y, **kw) if y is not None else scorer(estimator, X, **kw)
            if isinstance(value, dict):
                raise ValueError("a scorer returning a dict is not supported; pass a dict of "
                                 "scorers as scoring instead")
            out[name] = float(value)
        except Exception:
            if error_score == "raise":
                raise
            warnings.warn(f"Scoring failed. The score on this train-test partition for these "
                          f"parameters will be set to {error_score}. Details:\n"
                          f"{traceback.format_exc()}", UserWarning)
            out[name] = error_score
    return out


def _fit_and_score(estimator, X, y, train, test, scorers, fit_params, return_train_score,
                   error_score, return_estimator=False, prefix=None, score_params=None):
    """Fit on the train rows, score on the test rows; a dict as scikit-learn's ``_fit_and_score``.

    ``prefix`` = (fitted pipeline prefix steps, transformed training X) skips refitting the
    shared pipeline steps: only the final step is fitted, on the transformed rows.
    ``score_params`` (one value per row of X, e.g. ``sample_weight``) go to the scorers, cut to
    the rows scored.
    """
    X_train, y_train = take_rows(X, train), take_rows(y, train)
    X_test, y_test = take_rows(X, test), take_rows(y, test)
    fit_params = {k: take_rows(v, train) if _is_row_param(v, X) else v
                  for k, v in (fit_params or {}).items()}
    result = {"fit_error": None, "n_test_samples": len(test)}
    start = time.time()
    try:
        if prefix is not None:
            steps, Xt = prefix
            final_name, final = estimator.steps[-1]
            if final not in (None, "passthrough"):
                final.fit(Xt, y_train, **fit_params)
            estimator = Pipeline(list(steps) + [(final_name, final)])
        elif y_train is None:
            estimator.fit(X_train, **fit_params)
        else:
            estimator.fit(X_train, y_train, **fit_params)
    except Exception:
        result["fit_time"] = time.time() - start
        result["score_time"] = 0.0
        if error_score == "raise":
            raise
        result["fit_error"] = traceback.format_exc()
        nan = {name: error_score for name in scorers}
        result["test_scores"] = nan
        if return_train_score:
            result["train_scores"] = dict(nan)
    else:
        result["fit_time"] = time.time() - start
        start = time.time()
        result["test_scores"] = _score(scorers, estimator, X_test, y_test, error_score,
                                       _rows_of(score_params, X, test))
        result["score_time"] = time.time() - start
        if return_train_score:
            result["train_scores"] = _score(scorers, estimator, X_train, y_train, error_score,
                                            _rows_of(score_params, X, train))
    if return_estimator:
        result["estimator"] = estimator
    return result


def search_score_params(scorers, fit_params, owner: str) -> dict:
    """What a search's scorers receive besides (estimator, X, y): ``sample_weight`` when it was
    given to ``fit`` and every scorer takes it, as scikit-learn's searches do (1.7 and later,
    without metadata routing); a scorer that cannot take it is warned about and the scores are
    left unweighted."""
    import inspect

    weights = (fit_params or {}).get("sample_weight")
    if weights is None or isinstance(weights, str):
        return {}

    def accepts(scorer):
        if hasattr(scorer, "_accept_sample_weight"):  # scikit-learn's scorers
            return bool(scorer._accept_sample_weight())
        try:
            return "sample_weight" in inspect.signature(scorer).parameters
        except (TypeError, ValueError):
            return False

    refused = [name for name, scorer in scorers.items() if not accepts(scorer)]
    for name in refused:
        warnings.warn(f"The scoring {name}={scorers[name]!r} does not take sample_weight: "
                      f"{owner}'s scores are not weighted although fit got sample_weight",
                      UserWarning, stacklevel=3)
    return {} if refused else {"sample_weight": weights}


def _rows_of(params, X, rows):
    """The row-aligned values of ``params`` cut to ``rows`` (the others as they are)."""
    return {k: take_rows(v, rows) if _is_row_param(v, X) else v
            for k, v in (params or {}).items()}


def _is_row_param(v, X) -> bool:
    if isinstance(v, str) or v is None or np.isscalar(v):
        return False
    try:
        return n_rows(v) == n_rows(X)
    except Exception:
        return False


# ---- task path: scattered data, one task per fit, pipeline prefixes shared ----

def _task_fit_and_score(estimator, params, X, y, splits, fold, scorers, fit_params,
                        return_train_score, error_score, return_estimator, prefix=None,
                        score_params=None):
    train, test = splits[fold]
    est = clone(estimator).set_params(**clone(params, safe=False))
    return _fit_and_score(est, X, y, train, test, scorers, fit_params, return_train_score,
                          error_score, return_estimator, prefix, score_params)


def _task_fit_prefix(pipeline, params, X, y, splits, fold):
    """Fit every step but the last on the fold's training rows (once for several candidates)."""
    train, _ = splits[fold]
    pipe = clone(pipeline).set_params(**clone(params, safe=False))
    X_train, y_train = take_rows(X, train), take_rows(y, train)
    try:
        Xt = X_train
        steps = []
        for name, step in pipe.steps[:-1]:
            if step in (None, "passthrough"):
                steps.append((name, step))
                continue
            Xt = step.fit_transform(Xt, y_train) if y_train is not None else step.fit_transform(Xt)
            steps.append((name, step))
        return steps, Xt
    except Exception:
        return None  # the candidates then fit the whole pipeline and report the error themselves


def _final_name(estimator):
    if isinstance(estimator, Pipeline) and len(estimator.steps) > 1:
        return estimator.steps[-1][0]
    return None


def _split_params(params, final):
    """(prefix params, final-step params): the part shared by candidates and the rest."""
    pre = {k: v for k, v in params.items() if not (k == final or k.startswith(final + "__"))}
    return pre, {k: v for k, v in params.items() if k not in pre}


def _run_tasks(client, estimator, candidates, X, y, splits, scorers, fit_params,
               return_train_score, error_score, return_estimator, progress, score_params=None):
    # One copy of the data and of the fold indices per worker, shared by all the fit tasks.
    Xf = client.scatter(X, broadcast=True)
    yf = None if y is None else client.scatter(y, broadcast=True)
    splits_f = client.scatter([list(splits)], broadcast=True)[0]
    final = _final_name(estimator)
    use_prefix = final is not None and not fit_params
    prefixes = {}
    futures = []
    for (ci, params), (fold, _) in product(enumerate(candidates), enumerate(splits)):
        prefix = None
        if use_prefix:
            pre, _ = _split_params(params, final)
            key = (fold, repr(sorted(pre.items(), key=lambda kv: kv[0])))
            if key not in prefixes:
                prefixes[key] = client.submit(_task_fit_prefix, estimator, pre, Xf, yf, splits_f,
                                              fold, pure=False)
            prefix = prefixes[key]
        futures.append(client.submit(_task_fit_and_score_prefixed, estimator, params, Xf, yf,
                                     splits_f, fold, scorers, fit_params, return_train_score,
                                     error_score, return_estimator, prefix, score_params,
                                     pure=False))
    return _gather_in_order(client, futures, progress)


def _task_fit_and_score_prefixed(estimator, params, X, y, splits, fold, scorers, fit_params,
                                 return_train_score, error_score, return_estimator, prefix,
                                 score_params=None):
    if prefix is not None:
        # The fitted prefix replaces the unfitted steps; only the final step is fitted here.
        est = clone(estimator).set_params(**clone(params, safe=False))
        train, test = splits[fold]
        return _fit_and_score(est, X, y, train, test, scorers, fit_params, return_train_score,
                              error_score, return_estimator, prefix, score_params)
    return _task_fit_and_score(estimator, params, X, y, splits, fold, scorers, fit_params,
                               return_train_score, error_score, return_estimator,
                               score_params=score_params)


def _gather_in_order(client, futures, progress):
    from distributed import as_completed

    done = 0
    for fut in as_completed(futures):
        done += 1
        if fut.status == "error":
            # error_score="raise" or a bug: cancel the rest, raise the task's exception here.
            client.cancel(futures)
            fut.result()
        if progress:
            progress(done, len(futures))
    return client.gather(futures)


# ---- client-thread path: concurrent driver loops on Dask data ----

def _run_threads(client, estimator, candidates, X, y, splits, scorers, fit_params,
                 return_train_score, error_score, return_estimator, progress, n_jobs,
                 persist_folds, refits=None, score_params=None):
    if client is not None and not is_dask(X):
        # The estimator's layout check first: the 2-D chunking below would otherwise fail on a
        # 1-D/3-D X with Dask's "Chunks do not add up" error.
        # (Sparse X passes: whether the estimator takes it is for its own fit to say.)
        X = check_x_layout(X, type(estimator).__name__, accept_sparse=True)
        # Put local data on the workers once; every fit then reads its blocks there.
        X = client.persist(sparse_blocks(X, _block_rows(X)) if is_sparse(X) else
                           da.from_array(np.asarray(X), chunks=(_block_rows(X), -1)))
        if y is not None and not isinstance(y, str):
            y = client.persist(da.from_array(np.asarray(y), chunks=(X.chunks[0],)))
    n_folds = len(splits)
    groups = _stack_groups(estimator, candidates, fit_params)
    # A stackable group trains all its (candidate, fold) models in shared passes over X (one
    # driver loop); the other candidates run one driver loop per fold.
    use_grid = is_dask(X) and n_folds > 1
    jobs = [("grid", group, None) if key is not None and use_grid else ("fold", group, f)
            for key, group in groups for f in ([None] if key is not None and use_grid
                                               else range(n_folds))]
    need_train = return_train_score or any(kind == "fold" for kind, _, _ in jobs)
    folds = _fold_parts(client, X, y, splits, need_train, persist_folds)
    ctx = _Ctx(estimator, candidates, X, y, splits, folds, scorers, fit_params or {},
               return_train_score, error_score, return_estimator, client, refits,
               score_params or {})
    total = len(candidates) * n_folds
    results = [None] * total
    n_done = 0

    def collect(out):
        nonlocal n_done
        for ci, fold, r in out:
            results[ci * n_folds + fold] = r
        n_done += len(out)
        if progress:
            progress(n_done, total)

    if client is None:
        for job in jobs:
            collect(_run_job(ctx, job))
        return results

    def in_client(job):
        # Client threads do not inherit the caller's current client (a context variable).
        with client.as_current():
            return _run_job(ctx, job)

    workers = min(len(jobs), n_jobs if n_jobs and n_jobs > 0 else 64)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dml-search") as pool:
        futs = [pool.submit(in_client, job) for job in jobs]
        from concurrent.futures import as_completed

        for f in as_completed(futs):
            collect(f.result())
    return results


class _Ctx:
    """What every job of one batch of fits shares."""

    def __init__(self, estimator, candidates, X, y, splits, folds, scorers, fit_params,
                 return_train_score, error_score, return_estimator, client, refits,
                 score_params):
        self.estimator, self.candidates, self.X, self.y = estimator, candidates, X, y
        self.score_params = score_params
        self.splits, self.folds, self.scorers, self.fit_params = splits, folds, scorers, fit_params
        self.return_train_score, self.error_score = return_train_score, error_score
        self.return_estimator, self.client, self.refits = return_estimator, client, refits

    def make(self, ci):
        return clone(self.estimator).set_params(**clone(self.candidates[ci], safe=False))

    def fold_params(self, fold):
        train = self.splits[fold][0]
        return {k: take_rows(v, train) if _is_row_param(v, self.X) else v
                for k, v in self.fit_params.items()}


def _fold_parts(client, X, y, splits, need_train, persist_folds):
    """Per fold [X_train, y_train, X_test, y_test] (the train parts None when not needed),
    persisted once when there is a client and ``persist_folds``."""
    folds = []
    for train, test in splits:
        parts = [take_rows(X, train) if need_train else None,
                 take_rows(y, train) if need_train else None,
                 take_rows(X, test), take_rows(y, test)]
        if client is not None and persist_folds:
            lazy = [p for p in parts if is_dask(p)]
            done = iter(client.persist(lazy))
            parts = [next(done) if is_dask(p) else p for p in parts]
        folds.append(parts)
    return folds


def _run_job(ctx: _Ctx, job):
    """Run one job; returns ``[(candidate, fold, result), ...]``."""
    kind, group, fold = job
    if kind == "grid":
        from dml.linear_model._base import NotStackable

        # With a refit to come, one more group trains every candidate on all of X: a step of
        # the grid costs about the same with it, and the refit then costs nothing.
        with_all = ctx.refits is not None
        n_folds = len(ctx.splits)
        ests = [[ctx.make(ci) for ci in group] for _ in range(n_folds + with_all)]
        start = time.time()
        try:
            fitted = type(ests[0][0])._fit_stacked(
                ests, ctx.X, ctx.y, **ctx.fit_params,
                train_indices=[train for train, _ in ctx.splits] + [None] * with_all)
        except NotStackable:
            # The folds need problems of their own (e.g. a fold without some class).
            return [r for f in range(len(ctx.splits)) for r in _run_job(ctx, ("fold", group, f))]
        except Exception as exc:  # noqa: BLE001 - an error of the data: every fit fails with it
            if ctx.error_score == "raise":
                raise
            fitted = [[exc] * len(group) for _ in ests]
        fit_time = (time.time() - start) / (len(group) * len(ests))
        if with_all:
            for ci, model in zip(group, fitted[-1]):
                if not isinstance(model, Exception):
                    ctx.refits[ci] = (model, fit_time)
        cells = [(ci, f, ests[f][k], fitted[f][k]) for f in range(n_folds)
                 for k, ci in enumerate(group)]
        return _score_cells(ctx, cells, fit_time)
    Xtr, ytr = ctx.folds[fold][:2]
    if Xtr is None:  # a grid job that fell back to per-fold fits
        train = ctx.splits[fold][0]
        Xtr, ytr = take_rows(ctx.X, train), take_rows(ctx.y, train)
    ests = [ctx.make(ci) for ci in group]
    fp = ctx.fold_params(fold)
    start = time.time()
    try:
        if len(ests) > 1:
            fitted = type(ests[0])._fit_stacked(ests, Xtr, ytr, **fp)
        else:
            fitted = [ests[0].fit(Xtr, **fp) if ytr is None else ests[0].fit(Xtr, ytr, **fp)]
    except Exception as exc:  # noqa: BLE001 - reported as the fits' failure (error_score)
        if ctx.error_score == "raise":
            raise
        fitted = [exc] * len(ests)
    fit_time = (time.time() - start) / len(ests)
    return _score_cells(ctx, [(ci, fold, e, r) for ci, e, r in zip(group, ests, fitted)],
                        fit_time)


def _score_cells(ctx: _Ctx, cells, fit_time):
    """Results of fits ``(candidate, fold, estimator, fitted or exception)``: scores, or
    ``error_score`` and the traceback for a fit that failed.

    Each candidate's ``fit_time`` is the training time divided by the number of models trained
    together (one, unless stacked). The scorings run concurrently (each is a small computation
    whose time is mostly the scheduler's round trip).
    """
    for _, _, _, res in cells:
        if isinstance(res, Exception) and ctx.error_score == "raise":
            raise res

    def one(cell):
        ci, fold, est, res = cell
        n_test = len(ctx.splits[fold][1])
        result = {"fit_error": None, "n_test_samples": n_test, "fit_time": fit_time}
        if isinstance(res, Exception):
            result["score_time"] = 0.0
            result["fit_error"] = "".join(traceback.format_exception(res))
            result["test_scores"] = {name: ctx.error_score for name in ctx.scorers}
            if ctx.return_train_score:
                result["train_scores"] = {name: ctx.error_score for name in ctx.scorers}
        else:
            Xtr, ytr, Xte, yte = ctx.folds[fold]
            t = time.time()
            train, test = ctx.splits[fold]
            result["test_scores"] = _score(ctx.scorers, est, Xte, yte, ctx.error_score,
                                           _rows_of(ctx.score_params, ctx.X, test))
            result["score_time"] = time.time() - t
            if ctx.return_train_score:
                result["train_scores"] = _score(ctx.scorers, est, Xtr, ytr, ctx.error_score,
                                                _rows_of(ctx.score_params, ctx.X, train))
        if ctx.return_estimator:
            result["estimator"] = est
        return ci, fold, result

    if ctx.client is None or len(cells) == 1:
        return [one(c) for c in cells]
    client = ctx.client

    def in_client(cell):
        with client.as_current():
            return one(cell)

    with ThreadPoolExecutor(max_workers=min(len(cells), 16),
                            thread_name_prefix="dml-score") as pool:
        return list(pool.map(in_client, cells))


def _stack_groups(estimator, candidates, fit_params) -> list:
    """``[(key, [candidate indices])]``: candidates whose fits can share their passes.

    An SGD estimator's candidates that differ only in penalty weights or step-size constants
    share a ``_stack_key`` and are trained together by :mod:`dml.optim.stacked`; every other
    candidate is a group of its own with key None. Groups keep the candidates' order.
    """
    stackable = (hasattr(type(estimator), "_fit_stacked")
                 and not set(fit_params or {}) - {"sample_weight"})
    groups: dict = {}
    for ci, params in enumerate(candidates):
        key = None
        if stackable:
            try:
                key = clone(estimator).set_params(**clone(params, safe=False))._stack_key()
            except Exception:  # noqa: BLE001 - invalid parameters: the fit reports them
                key = None
        groups.setdefault(("alone", ci) if key is None else key, []).append(ci)
    return [(None if isinstance(k, tuple) and k[0] == "alone" else k, g)
            for k, g in groups.items()]


def _block_rows(X) -> int:
    n = n_rows(X)
    d = X.shape[1] if getattr(X, "ndim", 2) > 1 else 1
    # About 8 MiB per block, at least 2 blocks per core-ish for interleaving.
    return max(1, min(max(n // 8, 1), (8 << 20) // max(8 * d, 1)))


def _is_dml(estimator) -> bool:
    from dml.base import DaskEstimatorMixin

    if isinstance(estimator, DaskEstimatorMixin):
        return True
    if isinstance(estimator, Pipeline):
        return any(_is_dml(s) for _, s in estimator.steps if s not in (None, "passthrough"))
    return any(_is_dml(v) for k, v in estimator.get_params(deep=False).items()
               if hasattr(v, "get_params") and not isinstance(v, type))


def uses_dask_path(estimator, X, y) -> bool:
    """Client threads for dml estimators and Dask data, tasks for scikit-learn on local data."""
    return is_dask(X) or is_dask(y) or _is_dml(estimator)


def _client():
    try:
        from distributed import Client

        return Client.current(allow_global=True)
    except (ImportError, ValueError):
        return None


def run_fits(estimator, candidates, X, y, splits, scorers, *, fit_params=None,
             return_train_score=False, error_score=np.nan, return_estimator=False,
             n_jobs=None, persist_folds=True, verbose=0, refits=None, score_params=None,
             display=None, desc=""):
    """Fit and score every (candidate, fold) pair concurrently; results in that order.

    ``refits``: a dict to receive, per candidate index, the candidate fitted on all of X when
    that came for free — stacked candidates train it in the same passes as their folds (a
    search's refit then needs no fit of its own). ``score_params``: keyword arguments of the
    scorers (a search's ``sample_weight``), cut to each fold's scored rows. ``display``: a
    started display of :mod:`dml.optim.progress` that gets a record per finished fit (else
    ``verbose`` prints a line every tenth of the fits); each is also logged at INFO on the
    ``dml.model_selection`` logger under ``desc``.
    """
    client = _client()
    total = len(candidates) * len(splits)
    progress = _progress_printer(verbose, total, display, desc)
    if uses_dask_path(estimator, X, y):
        out = _run_threads(client, estimator, candidates, X, y, splits, scorers, fit_params,
                           return_train_score, error_score, return_estimator, progress, n_jobs,
                           persist_folds, refits, score_params)
    elif client is not None:
        out = _run_tasks(client, estimator, candidates, X, y, splits, scorers, fit_params,
                         return_train_score, error_score, return_estimator, progress,
                         score_params)
    else:
        out = []
        for i, (params, (train, test)) in enumerate(product(candidates, splits)):
            est = clone(estimator).set_params(**clone(params, safe=False))
            out.append(_fit_and_score(est, X, y, train, test, scorers, fit_params,
                                      return_train_score, error_score, return_estimator,
                                      score_params=score_params))
            if progress:
                progress(i + 1, total)
    _warn_about_failures(out, error_score)
    return out


def _progress_printer(verbose, total, display=None, desc=""):
    if display is not None:
        def update(done, total_):
            display.update({"epoch": done, "unit": "fit"})
            _logger.info("%s: %d/%d fits done", desc, done, total_)
        return update
    if not verbose:
        if _logger.isEnabledFor(logging.INFO):
            return lambda done, total_: _logger.info("%s: %d/%d fits done", desc, done, total_)
        return None
    start = time.time()
    step = max(1, total // 10) if verbose < 2 else 1

    def show(done, total_):
        if done % step == 0 or done == total_:
            print(f"[dml] {done}/{total_} fits done ({time.time() - start:.1f} s)",
                  file=sys.stderr, flush=True)
    return show


def _warn_about_failures(out, error_score):
    failed = [r["fit_error"] for r in out if r["fit_error"] is not None]
    if not failed:
        return
    if len(failed) == len(out):
        raise ValueError(f"All the {len(out)} fits failed. It is very likely that your model is "
                         f"misconfigured. You can try to debug the error by setting "
                         f"error_score='raise'.\n\nBelow are more details about the failures:\n"
                         f"{failed[0]}")
    warnings.warn(f"{len(failed)} fits failed out of a total of {len(out)}. The score on these "
                  f"train-test partitions for these parameters will be set to {error_score}. "
                  f"If these failures are not expected, you can try to debug them by setting "
                  f"error_score='raise'.\n\nBelow are more details about the failures:\n"
                  f"{failed[0]}", FitFailedWarning)


# --------------------------------------------------------------------------------------------
# cross_validate
# --------------------------------------------------------------------------------------------

def cross_validate(estimator, X, y=None, *, groups=None, scoring=None, cv=None, n_jobs=None,
                   verbose=0, params=None, return_train_score=False, return_estimator=False,
                   return_indices=False, error_score=np.nan, persist_folds=True):
    """Evaluate by cross-validation with all folds fitted concurrently on the cluster.

    Same arguments and result as ``sklearn.model_selection.cross_validate`` (``fit_time``,
    ``score_time``, ``test_<name>`` / ``test_score``, optionally ``train_*``, ``estimator``,
    ``indices``). The folds come from :func:`check_cv` (scikit-learn's rule: stratified for
    classifiers given an int), so given the same splits the scores equal scikit-learn's for
    deterministic estimators. ``groups`` (NumPy, pandas or Dask, one value per row) goes to the
    splitter, e.g. :class:`~dml.model_selection.GroupKFold`. How the fits run: see
    :func:`run_fits` and this module's doc.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import GaussianNB
    >>> X = np.r_[np.zeros((10, 2)), np.ones((10, 2))] + np.arange(20)[:, None] * 0.01
    >>> y = np.r_[np.zeros(10), np.ones(10)]
    >>> cross_validate(GaussianNB(), X, y, cv=5)["test_score"]
    array([1., 1., 1., 1., 1.])
    """
    if isinstance(y, str):
        raise TypeError("cross_validate: pass y as an array (a column name is not split with X)")
    dask_path = uses_dask_path(estimator, X, y)
    scorers, multimetric = check_scoring(estimator, scoring, dask_path=dask_path)
    cv = check_cv(cv, y, classifier=is_classifier(estimator))
    splits = split_indices(cv, X, y, groups)
    out = run_fits(estimator, [{}], X, y, splits, scorers, fit_params=params,
                   return_train_score=return_train_score, error_score=error_score,
                   return_estimator=return_estimator, n_jobs=n_jobs,
                   persist_folds=persist_folds, verbose=verbose)
    result = {"fit_time": np.array([r["fit_time"] for r in out]),
              "score_time": np.array([r["score_time"] for r in out])}
    if return_estimator:
        result["estimator"] = [r["estimator"] for r in out]
    if return_indices:
        result["indices"] = {"train": [s[0] for s in splits], "test": [s[1] for s in splits]}
    for name in scorers:
        key = name if multimetric else "score"
        result[f"test_{key}"] = np.array([r["test_scores"][name] for r in out], dtype=float)
        if return_train_score:
            result[f"train_{key}"] = np.array([r["train_scores"][name] for r in out],
                                              dtype=float)
    return result


def cross_val_score(estimator, X, y=None, *, groups=None, scoring=None, cv=None, n_jobs=None,
                    verbose=0, params=None, error_score=np.nan):
    """Test scores of :func:`cross_validate` for one scorer, as scikit-learn's function.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import Ridge
    >>> X = np.arange(40.0).reshape(20, 2); y = X @ [1.0, 2.0]
    >>> bool((cross_val_score(Ridge(alpha=1e-9), X, y, cv=4) > 0.99).all())
    True
    """
    if scoring is not None and not (isinstance(scoring, str) or callable(scoring)):
        raise ValueError("cross_val_score takes one scorer; use cross_validate for several")
    res = cross_validate(estimator, X, y, groups=groups, scoring=scoring, cv=cv, n_jobs=n_jobs,
                         verbose=verbose, params=params, error_score=error_score)
    return res["test_score"]
