"""Grid and randomized hyper-parameter search with every (candidate, fold) fit run concurrently.

``GridSearchCV`` / ``RandomizedSearchCV`` take scikit-learn's parameters and produce
scikit-learn's attributes (``cv_results_`` with the same keys and layout, ``best_index_``,
``best_params_``, ``best_score_``, ``best_estimator_``, ``refit_time_``, ``scorer_``,
``n_splits_``, ``multimetric_``), laid out by scikit-learn's own formatting code. What differs is
how the fits run (see :mod:`dml.model_selection._validation`): all of them at once on the Dask
cluster, as tasks on scattered data for scikit-learn estimators, as concurrent driver loops for
dml estimators and Dask data. ``n_jobs`` bounds the number of fits in flight on the client-thread
path (default: all, up to 64); ``verbose > 0`` or ``progress`` shows a progress line per
finished fit (see :mod:`dml.optim.progress`), and every finished fit is logged at INFO on the
``dml.model_selection`` logger.
"""
from __future__ import annotations

import time

import numpy as np

from sklearn import model_selection as _skms
from sklearn.base import clone, is_classifier
from sklearn.utils import indexable

from dml._blocks import is_dask
from dml._typing import ArrayLike, Self
from dml.base import fit_context
from dml.optim.progress import make_progress
from dml.model_selection._split import check_cv, split_indices
from dml.model_selection._validation import (check_scoring, run_fits, search_score_params,
                                             uses_dask_path)

__all__ = ["GridSearchCV", "RandomizedSearchCV"]


class _SearchMixin:
    """``fit`` of a search: splits once, runs all fits concurrently, formats as scikit-learn.

    The parameters are scikit-learn's, with its constraints (``_parameter_constraints`` of
    its searches), except ``scoring``, which :func:`check_scoring` checks: dml's scorers of
    Dask data have names of their own.
    """

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike | None = None, **params) -> Self:
        """Run fit with all sets of parameters, then refit the best on all of X (``refit``).

        Parameters
        ----------
        X : ndarray, DataFrame, dask.array.Array or dask.dataframe.DataFrame
        y : array-like, Dask array/Series or None
        **params
            Passed to the estimator's ``fit``; row-aligned arrays are split with X. ``groups``
            (array-like or Dask array/Series of shape (n_samples,)) goes to the splitter
            instead, e.g. to :class:`~dml.model_selection.GroupKFold`.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import Ridge
        >>> from dml.model_selection import GridSearchCV
        >>> X = np.random.default_rng(0).normal(size=(60, 3)); y = X @ [1.0, -2.0, 0.5]
        >>> search = GridSearchCV(Ridge(), {"alpha": [0.1, 1000.0]}, cv=3)
        >>> search.fit(X, y).best_params_
        {'alpha': 0.1}
        """
        if isinstance(y, str):
            raise TypeError(f"{type(self).__name__}.fit: pass y as an array; a column name "
                            "cannot be split with X")
        # As scikit-learn's search (utils.indexable): sparse input becomes CSR and other
        # array-likes NumPy, so every fold can take rows of it. Dask input is split lazily.
        if not is_dask(X) and not is_dask(y):
            X, y = indexable(X, y)
        dask_path = uses_dask_path(self.estimator, X, y)
        scorers, multimetric = check_scoring(self.estimator, self.scoring, dask_path=dask_path)
        if multimetric:
            self._check_refit_for_multimetric(scorers)
            refit_metric = self.refit if isinstance(self.refit, str) else None
        else:
            refit_metric = "score"
        # As scikit-learn without metadata routing: groups go to the splitter, not to fit.
        groups = params.pop("groups", None)
        # sample_weight weights the fits and, as in scikit-learn, the scores of every fold.
        score_params = search_score_params(scorers, params, type(self).__name__)
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = split_indices(cv, X, y, groups)
        self.n_splits_ = len(splits)
        base = clone(self.estimator)
        all_params, all_out = [], []
        results = {}
        # Stacked candidates come back already fitted on all of X (see run_fits): the refit of
        # the best one is then taken from there.
        refits = {} if self.refit else None
        trained_refits = {}

        def evaluate_candidates(candidate_params, cv=None, more_results=None, **_):
            nonlocal results
            candidate_params = list(candidate_params)
            if self.verbose > 0:
                print(f"Fitting {len(splits)} folds for each of {len(candidate_params)} "
                      f"candidates, totalling {len(splits) * len(candidate_params)} fits")
            if display is not None:
                display.start(len(splits) * len(candidate_params), desc=type(self).__name__)
            out = run_fits(base, candidate_params, X, y, splits, scorers, fit_params=params,
                           return_train_score=self.return_train_score,
                           error_score=self.error_score, n_jobs=self.n_jobs,
                           persist_folds=getattr(self, "persist_folds", True),
                           verbose=self.verbose, refits=refits, score_params=score_params,
                           display=display, desc=type(self).__name__)
            # Candidate indices of this batch → indices in all_params.
            for ci in list(refits or {}):
                if ci < len(candidate_params):
                    trained_refits[len(all_params) + ci] = refits.pop(ci)
            if not out:
                raise ValueError("No fits were performed. Was the CV iterator empty? Were "
                                 "there no candidates?")
            if not multimetric:
                for r in out:
                    r["test_scores"] = r["test_scores"]["score"]
                    if self.return_train_score:
                        r["train_scores"] = r["train_scores"]["score"]
            all_params.extend(candidate_params)
            all_out.extend(out)
            results = self._format_results(all_params, len(splits), all_out)
            return results

        display = make_progress(getattr(self, "progress", None), self.verbose)
        try:
            evaluate_candidates(self._candidates())
        finally:
            if display is not None:
                display.close()
        self.multimetric_ = multimetric
        if self.refit or not multimetric:
            self.best_index_ = self._select_best_index(self.refit, refit_metric, results)
            if not callable(self.refit):
                self.best_score_ = results[f"mean_test_{refit_metric}"][self.best_index_]
            self.best_params_ = results["params"][self.best_index_]
        if self.refit:
            if self.best_index_ in trained_refits:
                # Trained with the folds, in the same passes: what fit(X, y) gives (up to
                # rounding); its time is its share of those passes.
                self.best_estimator_, self.refit_time_ = trained_refits[self.best_index_]
            else:
                self.best_estimator_ = clone(base).set_params(
                    **clone(self.best_params_, safe=False))
                start = time.time()
                if y is not None:
                    self.best_estimator_.fit(X, y, **params)
                else:
                    self.best_estimator_.fit(X, **params)
                self.refit_time_ = time.time() - start
            if hasattr(self.best_estimator_, "feature_names_in_"):
                self.feature_names_in_ = self.best_estimator_.feature_names_in_
        self.scorer_ = scorers if multimetric else scorers["score"]
        self.cv_results_ = results
        return self

    def score(self, X: ArrayLike, y: ArrayLike | None = None, **params) -> float:
        """Score of the refitted best estimator with the search's (refit) scorer.

        Parameters
        ----------
        X : array-like, DataFrame, Dask array or Dask DataFrame of shape (n_samples, n_features)
            The samples to score.
        y : array-like or Dask array/Series of shape (n_samples,), default=None
            The true targets (None for unsupervised estimators).
        **params : dict
            Passed on to the scorer (for example ``sample_weight``).

        Returns
        -------
        score : float
            The best estimator's score on (X, y).

        Examples
        --------
        >>> import numpy as np
        >>> from dml.linear_model import Ridge
        >>> from dml.model_selection import GridSearchCV
        >>> X = np.random.default_rng(0).normal(size=(60, 3)); y = X @ [1.0, -2.0, 0.5]
        >>> search = GridSearchCV(Ridge(), {"alpha": [0.1, 1000.0]}, cv=3)
        >>> round(search.fit(X, y).score(X, y), 3)
        1.0
        """
        if not hasattr(self, "cv_results_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call "
                                 "'fit' with appropriate arguments before using this estimator.")
        if not self.refit:
            raise AttributeError("score is available only with refit=True")
        scorer = self.scorer_[self.refit] if self.multimetric_ else self.scorer_
        return scorer(self.best_estimator_, X, y, **params)

    def _check_refit_for_multimetric(self, scores):
        if self.refit is not False and not callable(self.refit) and (
                not isinstance(self.refit, str) or self.refit not in scores):
            raise ValueError(
                "For multi-metric scoring, the parameter refit must be set to a scorer key or a "
                f"callable to refit an estimator with the best parameter setting on the whole "
                f"data and make the best_* attributes available for that metric. If this is "
                f"not needed, refit should be set to False explicitly. {self.refit!r} was "
                "passed.")

    def __sklearn_tags__(self):
        return super().__sklearn_tags__()


class GridSearchCV(_SearchMixin, _skms.GridSearchCV):
    """Exhaustive search over a parameter grid, all (candidate, fold) fits concurrent.

    scikit-learn's ``GridSearchCV`` (same parameters and attributes) whose fits run on the
    current Dask cluster: see the module documentation. Given the same splits (the default ``cv``
    follows scikit-learn's rule), ``cv_results_`` scores, ``best_params_`` and the refitted
    model equal scikit-learn's for deterministic estimators.

    Parameters
    ----------
    estimator : estimator object
        A scikit-learn or dml estimator, cloned for every fit.
    param_grid : dict or list of dicts
        Parameter names mapped to the lists of values to try.
    scoring : str, callable, list, tuple, dict or None, default=None
        scikit-learn's scorer names or callables (dml's blockwise scorers for Dask data).
    n_jobs : int or None, default=None
        Fits in flight on the client-thread path (default: all, up to 64).
    refit : bool, str or callable, default=True
        Refit the best candidate on all of X (the scorer that picks it, for several).
    cv : int, cross-validation generator, iterable or None, default=None
        scikit-learn's rule (dml's splitters split Dask data blockwise).
    verbose : int, default=0
        Above 0: a progress line on stderr per finished fit (plain lines when stderr is not a
        terminal), and scikit-learn's "Fitting k folds for each of n candidates" line.
    pre_dispatch : int or str, default="2*n_jobs"
        Accepted for compatibility with scikit-learn.
    error_score : "raise" or float, default=np.nan
        The score of a failed fit (or raise its error).
    return_train_score : bool, default=False
        Also score every fit on its training rows.
    progress : None, False, "text", "notebook", callable or object, default=None
        Progress display (see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.
        A callable gets ``{"epoch": fits finished, "unit": "fit"}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.linear_model import Ridge
    >>> X = np.random.default_rng(0).normal(size=(60, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> search = GridSearchCV(Ridge(), {"alpha": [0.1, 10.0, 1000.0]}, cv=3).fit(X, y)
    >>> search.best_params_, search.cv_results_["rank_test_score"].tolist()
    ({'alpha': 0.1}, [1, 2, 3])
    """

    _parameter_constraints = {**_skms.GridSearchCV._parameter_constraints,
                              "scoring": "no_validation", "progress": "no_validation"}

    def __init__(self, estimator, param_grid, *, scoring=None, n_jobs=None, refit=True, cv=None,
                 verbose=0, pre_dispatch="2*n_jobs", error_score=np.nan,
                 return_train_score=False, progress=None):
        super().__init__(estimator, param_grid, scoring=scoring, n_jobs=n_jobs, refit=refit,
                         cv=cv, verbose=verbose, pre_dispatch=pre_dispatch,
                         error_score=error_score, return_train_score=return_train_score)
        self.progress = progress

    def _candidates(self):
        return list(_skms.ParameterGrid(self.param_grid))


class RandomizedSearchCV(_SearchMixin, _skms.RandomizedSearchCV):
    """Randomized search over parameter distributions, all (candidate, fold) fits concurrent.

    scikit-learn's ``RandomizedSearchCV``: the ``n_iter`` candidates are drawn on the client with
    scikit-learn's ``ParameterSampler(random_state=random_state)`` (the same candidates as
    scikit-learn), then fitted as :class:`GridSearchCV` fits them.

    Parameters
    ----------
    estimator : estimator object
        A scikit-learn or dml estimator, cloned for every fit.
    param_distributions : dict or list of dicts
        Parameter names mapped to distributions (with ``rvs``) or lists to sample from.
    n_iter : int, default=10
        The number of candidates drawn.
    scoring : str, callable, list, tuple, dict or None, default=None
        scikit-learn's scorer names or callables (dml's blockwise scorers for Dask data).
    n_jobs : int or None, default=None
        Fits in flight on the client-thread path (default: all, up to 64).
    refit : bool, str or callable, default=True
        Refit the best candidate on all of X (the scorer that picks it, for several).
    cv : int, cross-validation generator, iterable or None, default=None
        scikit-learn's rule (dml's splitters split Dask data blockwise).
    verbose : int, default=0
        Above 0: a progress line on stderr per finished fit (plain lines when stderr is not a
        terminal), and scikit-learn's "Fitting k folds for each of n candidates" line.
    pre_dispatch : int or str, default="2*n_jobs"
        Accepted for compatibility with scikit-learn.
    error_score : "raise" or float, default=np.nan
        The score of a failed fit (or raise its error).
    random_state : int, RandomState or None, default=None
        Seeds the draw of the candidates.
    return_train_score : bool, default=False
        Also score every fit on its training rows.
    progress : None, False, "text", "notebook", callable or object, default=None
        Progress display (see :mod:`dml.optim.progress`); "notebook": an HTML bar in Jupyter.
        A callable gets ``{"epoch": fits finished, "unit": "fit"}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import GaussianNB
    >>> X = np.random.default_rng(0).normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
    >>> s = RandomizedSearchCV(GaussianNB(), {"var_smoothing": [1e-9, 1e-3, 1e-1]}, n_iter=2,
    ...                        cv=2, random_state=0).fit(X, y)
    >>> len(s.cv_results_["params"])
    2
    """

    _parameter_constraints = {**_skms.RandomizedSearchCV._parameter_constraints,
                              "scoring": "no_validation", "progress": "no_validation"}

    def __init__(self, estimator, param_distributions, *, n_iter=10, scoring=None, n_jobs=None,
                 refit=True, cv=None, verbose=0, pre_dispatch="2*n_jobs", random_state=None,
                 error_score=np.nan, return_train_score=False, progress=None):
        super().__init__(estimator, param_distributions, n_iter=n_iter, scoring=scoring,
                         n_jobs=n_jobs, refit=refit, cv=cv, verbose=verbose,
                         pre_dispatch=pre_dispatch, random_state=random_state,
                         error_score=error_score, return_train_score=return_train_score)
        self.progress = progress

    def _candidates(self):
        return list(_skms.ParameterSampler(self.param_distributions, self.n_iter,
                                           random_state=self.random_state))
