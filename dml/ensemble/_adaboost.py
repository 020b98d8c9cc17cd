"""AdaBoost (SAMME) over dml's histogram trees.

Each round fits a :class:`dml.tree.DecisionTreeClassifier` (a stump by default) on the current
sample weights, measures its weighted error ``err`` and gives it the weight

    α = learning_rate · (log((1 − err) / err) + log(K − 1))

then multiplies the weights of the misclassified rows by ``exp(α)`` and normalises them, as
scikit-learn's ``AdaBoostClassifier`` (SAMME). For Dask input the weights are a Dask array
beside the blocks of X, updated by blockwise tasks and persisted; only the tree and two sums
per round come back to the client. With dml's own tree as the learner, X is binned once,
every round grows its tree on those bins with its weights, and the weights are held and
updated beside the bins (:mod:`dml.ensemble._adaboost_rounds`; docs/gradient_boosting.md,
"AdaBoost").
"""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from dml._typing import Any, ArrayLike, Self
from dml._blocks import BlockSpec, with_known_rows
from dml._param_validation import RANDOM_STATE, HasMethods, Integral, Interval, Real
from dml.base import DaskEstimatorMixin, check_is_fitted, fit_context
from dml.ensemble._adaboost_rounds import HeldRounds, block_sums_total
from dml.tree import DecisionTreeClassifier

__all__ = ["AdaBoostClassifier"]


def _as_dask_vector(v, chunks):
    if isinstance(v, da.Array):
        return v
    return da.from_array(np.asarray(v), chunks=chunks)


class AdaBoostClassifier(ClassifierMixin, DaskEstimatorMixin, BaseEstimator):
    """AdaBoost-SAMME classifier over dml decision trees.

    Parameters
    ----------
    estimator : classifier or None, default None
        The weak learner (cloned each round); None is a dml ``DecisionTreeClassifier`` with
        ``max_depth=1``. It must accept ``sample_weight``.
    n_estimators : int, default 50
        Maximum rounds (fewer when a learner is perfect or no better than chance).
    learning_rate : float, default 1.0
        Multiplies each learner's weight α.
    random_state : None, int, RandomState or Generator
        Passed to the learners (their ``random_state``), each round its own seed.

    Attributes
    ----------
    estimators_ : list of fitted learners
    estimator_weights_ : ndarray of shape (n_estimators_,)
    estimator_errors_ : ndarray of shape (n_estimators_,)
    classes_, n_classes_, n_features_in_ : as scikit-learn

    Examples
    --------
    >>> import numpy as np
    >>> from dml.ensemble import AdaBoostClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = AdaBoostClassifier(n_estimators=20, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.85)
    True
    """

    _block_spec = BlockSpec(numeric=False)
    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, estimator=None, n_estimators=50, learning_rate=1.0, random_state=None):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.estimator is None
        return tags

    @fit_context
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the boosted learners.

        Parameters
        ----------
        X : array-like, DataFrame, dask array or dask DataFrame of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        sample_weight : array-like or dask array of shape (n_samples,), optional

        Returns
        -------
        self : object

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import AdaBoostClassifier
        >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] > 9).astype(int)
        >>> AdaBoostClassifier(n_estimators=3).fit(X, y).estimator_weights_.shape
        (1,)
        """
        from dml._random import seed_from

        name = type(self).__name__
        # Validates X, y and the weights (and records n_features_in_ / feature names).
        self._fit_blocks(X, y, sample_weight, numeric=False, allow_nan=True)
        lazy = isinstance(X, da.Array) or hasattr(X, "dask")
        if lazy:
            chunks = X.chunks[0] if isinstance(X, da.Array) else tuple(
                X.map_partitions(len).compute())
            if hasattr(y, "to_dask_array"):
                y = y.to_dask_array(lengths=chunks)
            yv = _as_dask_vector(y, chunks)
            yv = yv.ravel() if yv.ndim == 2 else yv
            w = (da.ones(yv.shape, chunks=yv.chunks) if sample_weight is None
                 else _as_dask_vector(sample_weight, chunks).astype(np.float64))
            classes = np.unique(yv.compute())
        else:
            yv = np.asarray(y)
            yv = yv.ravel() if yv.ndim == 2 else yv
            w = np.ones(len(yv)) if sample_weight is None else np.asarray(sample_weight,
                                                                          dtype=np.float64)
            classes = np.unique(yv)
        if len(classes) < 2:
            raise ValueError(f"{name}: y has a single class (1 class: {classes[0]!r}); a "
                             "classifier needs at least two classes")
        K = len(classes)
        n_rows = len(yv)
        total = float(w.sum().compute() if lazy else w.sum())
        if total <= 0:
            raise ValueError(f"{name}: Sample weights must contain at least one non-zero "
                             "number; every sample weight is zero, so no sample counts towards "
                             "the fit.")
        w = w / total
        if lazy:
            (w,) = dask.persist(w)
        seed = seed_from(self.random_state)
        base = self.estimator if self.estimator is not None else DecisionTreeClassifier(
            max_depth=1)
        self.estimators_, weights, errors = [], [], []
        # dml's own tree on Dask blocks: the data is validated, sketched and binned once, every
        # round grows its tree on the same bins with its own weights (the bins do not depend on
        # the weights), and the weights live beside the bins: a round's error and reweighting
        # come from the leaves the rows reached while the tree grew, with no pass over X.
        held = None
        # ("balanced" class weights are counted with each round's row weights: not reused.)
        reuse_bins = (lazy and type(base) is DecisionTreeClassifier
                      and not isinstance(base.class_weight, str))
        for i in range(self.n_estimators):
            est = clone(base)
            if "random_state" in est.get_params():
                est.set_params(random_state=(seed + i) % (2**31))
            # dml's trees count min_samples_* in weighted rows: weights summing to the row
            # count keep those limits meaning rows (the error ratio does not change).
            assign = None
            if reuse_bins:
                held, assign = self._fit_on_bins(est, X, y, w, n_rows, held, chunks)
                reuse_bins = held is not None
            else:
                est.fit(X, y, sample_weight=w * n_rows)
            if assign is not None:
                node_class = est.nodes_["value"].argmax(axis=1)
                err_sum, w_sum = held.error(assign, node_class)
            else:
                pred = est.predict(X)
                if lazy and np.isnan(pred.shape[0]):
                    pred = with_known_rows(pred, chunks)
                wrong = (pred != yv)
                err_sum, w_sum = (_sums_by_block([w * wrong, w], chunks) if lazy
                                  else ((w * wrong).sum(), w.sum()))
            err = float(err_sum) / float(w_sum)
            if err <= 0:
                self.estimators_.append(est)
                weights.append(1.0)
                errors.append(0.0)
                break
            if err >= 1.0 - 1.0 / K:
                if not self.estimators_:
                    raise ValueError(f"{name}: the first learner is no better than chance "
                                     f"(weighted error {err:.4f} >= {1 - 1 / K:.4f}); the "
                                     "ensemble cannot be fitted")
                break
            alpha = self.learning_rate * (np.log((1.0 - err) / err) + np.log(K - 1.0))
            self.estimators_.append(est)
            weights.append(alpha)
            errors.append(err)
            if i == self.n_estimators - 1:
                break
            if assign is not None:
                s = held.reweight(assign, node_class, alpha)
            else:
                w = w * np.exp(alpha * wrong * (w > 0))
                s = _sums_by_block([w], chunks)[0] if lazy else float(w.sum())
            if not np.isfinite(s) or s <= 0:
                break
            if assign is not None:
                held.normalise(s)
            else:
                w = w / s
                if lazy:
                    (w,) = dask.persist(w)
        self.classes_ = classes
        self.n_classes_ = K
        self.estimator_weights_ = np.asarray(weights)
        self.estimator_errors_ = np.asarray(errors)
        return self

    @staticmethod
    def _fit_on_bins(est, X, y, w, n_rows, held, chunks):
        """Fit the round's dml tree ``est`` on the bins of the first round with the weights
        ``w`` (the normalised weights, a Dask vector; held beside the bins from the second
        round on: ``held``, a :class:`~dml.ensemble._adaboost_rounds.HeldRounds`, None in the
        first round, which makes the bins). Returns ``(held, node assignments)`` for the next
        rounds and this round's error, or ``(None, None)`` when the blocks are not known to be
        X's row chunks (the weights could not be matched to them: the rounds use X)."""
        from dml.tree._model import bin_data, grow_on_bins

        fit = {"classify": True, "n_trees": 1, "max_features": est.max_features}
        if held is None:
            bins = round_bins = bin_data(est, X, y, w * n_rows, **fit)
            lengths = bins.blocks.known_lengths
            if lengths is None or tuple(int(n) for n in lengths) != tuple(chunks):
                grow_on_bins(est, bins, bootstrap=False, **fit)
                return None, None
            held = HeldRounds(bins, w, chunks)
        else:
            est._record_layout(held.bins.blocks, True)
            round_bins = held.round_bins(n_rows)
        return held, grow_on_bins(est, round_bins, bootstrap=False, need_assign=True, **fit)

    def decision_function(self, X: ArrayLike) -> Any:
        """SAMME scores: shape (n,) for two classes (positive: ``classes_[1]``), else (n, K).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask.array.Array

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import AdaBoostClassifier
        >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] > 9).astype(int)
        >>> AdaBoostClassifier().fit(X, y).decision_function(np.array([[15.0]]))
        array([2.])
        """
        check_is_fitted(self, "estimators_")
        self._predict_input(X)
        classes = self.classes_
        out = None
        for est, a in zip(self.estimators_, self.estimator_weights_):
            p = est.predict(X)
            match = p[:, None] == classes[None, :]
            term = match * a - (~match) * (a / (self.n_classes_ - 1))
            out = term if out is None else out + term
        out = out / self.estimator_weights_.sum()
        if self.n_classes_ == 2:
            return out[:, 1] - out[:, 0]
        return out

    def predict_proba(self, X: ArrayLike) -> Any:
        """Class probabilities: softmax of the scores divided by K − 1 (scikit-learn's).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray or dask.array.Array of shape (n_samples, n_classes)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import AdaBoostClassifier
        >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] > 9).astype(int)
        >>> AdaBoostClassifier().fit(X, y).predict_proba(np.array([[15.0]])).round(3)
        array([[0.119, 0.881]])
        """
        dec = self.decision_function(X)
        K = self.n_classes_
        if K == 2:
            dec = da.stack([-dec, dec], axis=1) if isinstance(dec, da.Array) else \
                np.column_stack([-dec, dec])
            dec = dec / 2
        else:
            dec = dec / (K - 1)
        e = np.exp(dec - dec.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X: ArrayLike) -> Any:
        """The class of highest score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray or dask.array.Array of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from dml.ensemble import AdaBoostClassifier
        >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] > 9).astype(int)
        >>> AdaBoostClassifier().fit(X, y).predict(np.array([[2.0], [15.0]]))
        array([0, 1])
        """
        dec = self.decision_function(X)
        idx = (dec > 0).astype(int) if self.n_classes_ == 2 else dec.argmax(axis=1)
        if isinstance(idx, np.ndarray):
            return self.classes_[idx]
        return idx.map_blocks(lambda i, c=self.classes_: c[i], dtype=self.classes_.dtype)


def _sums_by_block(vectors, chunks):
    """Each Dask vector's total as per-block sums in X's row blocks (``chunks``) added in
    block order, as the rounds on the held bins total them."""
    parts = [[dask.delayed(np.sum, pure=True)(b)
              for b in v.rechunk((tuple(chunks),)).to_delayed().ravel()] for v in vectors]
    return [block_sums_total(p) for p in dask.compute(*parts)]
