"""Naive Bayes on discrete features: multinomial, Bernoulli and categorical."""
from __future__ import annotations


import numpy as np
import pandas as pd

from dml._blocks import BlockSpec
from dml._param_validation import Integral, Interval, Real
from dml.naive_bayes._base import _BaseDiscreteNB
from dml.naive_bayes._categorical import _categorical_block, _categorical_combine, _feature_label
from dml.naive_bayes._kernels import _count_block, _count_combine, dense_counts

__all__ = ["MultinomialNB", "ComplementNB", "BernoulliNB", "CategoricalNB"]


class _CountNB(_BaseDiscreteNB):
    # Counts reduce as a one-hot product, which a CSR block does in O(nnz) (docs/sparse.md).
    _block_spec = BlockSpec(dtype=(np.float64,), accept_sparse=True)
    _binarize_at = None
    _non_negative = False

    def _fit_spec_overrides(self) -> dict:
        # Unbinarised sums are non-finite exactly when the block holds NaN or infinity (or
        # overflows), so the count kernel checks finiteness from them: one pass fewer.
        return {"check_finite": False} if self._binarize_at is None else {}

    def _reduce(self, blocks):
        return dense_counts(blocks.map_reduce(
            _count_block, self._binarize_at, self._non_negative, type(self).__name__,
            self.missing, combine=_count_combine, with_index=True))

    def _combine(self, parts):
        return dense_counts(_count_combine(parts))

    def _empty_stats(self, classes, d):
        L = len(classes)
        return {"classes": classes, "class_count": np.zeros(L),
                "feature_count": np.zeros((L, d)), "missing_count": np.zeros((L, d))}


class MultinomialNB(_CountNB):
    """Multinomial naive Bayes (e.g. word counts), fitted in one pass over Dask blocks.

    ``feature_count_`` and ``class_count_`` are weighted sums over the blocks, all classes at
    once; ``P(x_j | c) = (N_cj + alpha_j) / (N_c + sum_j alpha_j)`` as in scikit-learn.

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive (Laplace/Lidstone) smoothing parameter (0 for no smoothing).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning, as in
        scikit-learn; if True, alpha is used as given.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes; not adjusted to the data when given.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` (docs/naive_bayes.md):
        a missing count contributes 0 to ``feature_count_`` at fit time and its factor is skipped in
        the product at predict time (which for this model is the same as a count of 0). Infinity is
        always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
        Smoothed empirical log probability of each class.
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted sum of each feature per class.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        Empirical log probability of features given a class.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import MultinomialNB
    >>> X = np.array([[2, 1, 0], [3, 0, 1], [0, 2, 4], [1, 0, 3]])
    >>> y = np.array(["ham", "ham", "spam", "spam"])
    >>> clf = MultinomialNB().fit(X, y)
    >>> clf.feature_count_
    array([[5., 1., 1.],
           [1., 2., 7.]])
    >>> clf.predict(np.array([[0, 1, 3]]))
    array(['spam'], dtype='<U4')
    """

    _kind = "multinomial"
    _non_negative = True
    _positive_only = True

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.missing = missing

    def _finalise(self, stats):
        alpha = self._check_alpha()
        fc, cc = stats["feature_count"], stats["class_count"]
        smoothed_fc = fc + alpha
        smoothed_cc = smoothed_fc.sum(axis=1)
        # In place: at 2^20 hashed columns each (L, d) temporary costs as much as a log.
        log_fc = np.log(smoothed_fc, out=smoothed_fc)
        log_fc -= np.log(smoothed_cc.reshape(-1, 1))
        self.feature_log_prob_ = log_fc
        self.class_log_prior_ = self._class_log_prior(cc)
        self.feature_count_ = fc.copy()
        self.class_count_ = cc.copy()

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_)


class ComplementNB(_CountNB):
    """Complement naive Bayes (Rennie et al. 2003), fitted in one pass over Dask blocks.

    Suited to imbalanced text classes: each class is described by the word counts of all the
    *other* classes. The per-class counts are the same one-pass reduction as
    :class:`MultinomialNB`'s (also over sparse blocks); the weights follow scikit-learn:
    ``w_cj = -log((N_~cj + alpha_j) / (N_~c + sum_j alpha_j))`` with ``N_~cj`` the count of
    feature j outside class c, optionally normalised by their sum (``norm=True``).

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive (Laplace/Lidstone) smoothing parameter (0 for no smoothing).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning.
    fit_prior : bool, default=True
        Only used when the training data has a single class (as in scikit-learn).
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes; only used with a single class.
    norm : bool, default=False
        Normalise each class's weights (the second normalisation of Rennie et al.).
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means: ``"error"`` raises a ValueError; ``"ignore"`` counts a missing
        value as 0, at fit and at predict time. Infinity is always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted sum of each feature per class.
    feature_all_ : ndarray of shape (n_features,)
        Weighted sum of each feature over all classes.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        The complement weights of each class.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import ComplementNB
    >>> X = np.array([[2, 1, 0], [3, 0, 1], [0, 2, 4], [1, 0, 3]])
    >>> y = np.array(["ham", "ham", "spam", "spam"])
    >>> clf = ComplementNB().fit(X, y)
    >>> clf.feature_all_
    array([6., 3., 8.])
    >>> clf.predict(np.array([[0, 1, 3]]))
    array(['spam'], dtype='<U4')
    """

    _kind = "complement"
    _non_negative = True
    _positive_only = True
    _parameter_constraints = {**_BaseDiscreteNB._parameter_constraints, "norm": ["boolean"]}

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 norm=False, missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.norm = norm
        self.missing = missing

    def _finalise(self, stats):
        alpha = self._check_alpha()
        fc, cc = stats["feature_count"], stats["class_count"]
        # scikit-learn's ComplementNB._update_feature_log_prob
        self.feature_all_ = fc.sum(axis=0)
        comp_count = self.feature_all_ + alpha - fc
        logged = np.log(comp_count / comp_count.sum(axis=1, keepdims=True))
        self.feature_log_prob_ = (logged / logged.sum(axis=1, keepdims=True) if self.norm
                                  else -logged)
        self.class_log_prior_ = self._class_log_prior(cc)
        self.feature_count_ = fc.copy()
        self.class_count_ = cc.copy()

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_)


class BernoulliNB(_CountNB):
    """Bernoulli naive Bayes for binary features, fitted in one pass over Dask blocks.

    ``P(x_j = 1 | c) = (N_cj + alpha_j) / (N_c + 2 alpha_j)`` with counts reduced over the blocks,
    all classes at once, as in scikit-learn.

    Parameters
    ----------
    alpha : float or array-like of shape (n_features,), default=1.0
        Additive smoothing parameter. An array gives each feature its own alpha (scikit-learn
        1.9's BernoulliNB fails on array alphas; here they apply per feature).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning.
    binarize : float or None, default=0.0
        Threshold for binarizing X (``x > binarize`` is 1). None: X is taken as already binary.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes.
    missing : {"error", "ignore"}, default="error"
        What a NaN in X means. ``"error"`` raises a ValueError. ``"ignore"`` (docs/naive_bayes.md):
        a missing attribute is not counted for that attribute, so
        ``P(x_j = 1 | c) = (N_cj + alpha) / (M_cj + 2 alpha)`` where ``M_cj`` is the weighted
        number of class-c rows in which feature j is observed; at predict time a missing
        feature's factor is skipped in the product. Infinity is always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
    feature_count_ : ndarray of shape (n_classes, n_features)
        Weighted number of samples with feature j equal to 1, per class.
    feature_log_prob_ : ndarray of shape (n_classes, n_features)
        Empirical log probability of features given a class, ``log P(x_j = 1 | c)``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from dml.naive_bayes import BernoulliNB
    >>> X = np.array([[1, 0, 1], [1, 1, 1], [0, 0, 1], [0, 1, 0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> clf = BernoulliNB().fit(X, y)
    >>> np.exp(clf.feature_log_prob_)
    array([[0.75, 0.5 , 0.75],
           [0.25, 0.5 , 0.5 ]])
    >>> clf.predict(np.array([[1, 0, 0]]))
    array([0])
    """

    _kind = "bernoulli"

    def __init__(self, *, alpha=1.0, force_alpha=True, binarize=0.0, fit_prior=True,
                 class_prior=None, missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.binarize = binarize
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.missing = missing

    _parameter_constraints = {**_BaseDiscreteNB._parameter_constraints,
                              "binarize": [Interval(Real, 0, None, closed="left"), None]}

    @property
    def _binarize_at(self):
        return self.binarize

    def _finalise(self, stats):
        alpha = self._check_alpha()
        fc, cc = stats["feature_count"], stats["class_count"]
        # Rows where feature j is missing are not counted for j; without missing values
        # observed == class_count_ exactly and this is scikit-learn's formula.
        observed = cc.reshape(-1, 1) - stats["missing_count"]
        self.feature_log_prob_ = np.log(fc + alpha) - np.log(observed + alpha * 2)
        self.class_log_prior_ = self._class_log_prior(cc)
        self.feature_count_ = fc.copy()
        self.class_count_ = cc.copy()

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_, self.binarize)


class CategoricalNB(_BaseDiscreteNB):
    """Naive Bayes for categorical features, with categories discovered in the same pass.

    ``P(x_j = v | c) = (N_cjv + alpha) / (N_cj + alpha V_j)`` as in scikit-learn, with counts and
    categories reduced over the blocks in one pass.

    Each feature is one of two kinds, decided from X's dtype at fit time:

    * **integer codes** (numeric or boolean columns, as scikit-learn expects): the categories of
      feature j are ``0 .. n_categories_[j] - 1`` with ``n_categories_[j] = max(X[:, j]) + 1``
      (at least ``min_categories``). Negative or non-integer values raise a ValueError
      (scikit-learn silently truncates non-integer floats);
    * **labels** (string, object or pandas categorical columns of a DataFrame or an object/string
      array): the categories are the distinct values over all partitions, sorted, or the
      declared categories of a pandas categorical dtype, in their declared order.

    ``categories_[j]`` holds the values; column k of ``category_count_[j]`` and
    ``feature_log_prob_[j]`` belongs to ``categories_[j][k]``. A value at predict time that is
    not a known category raises a ValueError naming the feature and the value (scikit-learn
    raises an IndexError).

    Parameters
    ----------
    alpha : float, default=1.0
        Additive (Laplace/Lidstone) smoothing parameter (0 for no smoothing).
    force_alpha : bool, default=True
        If False and alpha is less than 1e-10, it is set to 1e-10 with a warning.
    fit_prior : bool, default=True
        Learn class prior probabilities; if False a uniform prior is used.
    class_prior : array-like of shape (n_classes,), default=None
        Prior probabilities of the classes.
    min_categories : int or array-like of shape (n_features,), default=None
        Minimum number of categories per integer-coded feature (as scikit-learn). Label features
        have exactly their known categories: it does not apply to them.
    missing : {"error", "ignore"}, default="error"
        What a missing value (None, NaN, pd.NA) in X means. ``"error"`` raises a ValueError.
        ``"ignore"`` (docs/naive_bayes.md): a missing attribute is not counted, so ``N_cj`` counts
        only the class-c rows where feature j is observed, and its factor is skipped in the product
        at predict time. Infinity is always an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,)
        Weighted number of samples per class.
    class_log_prior_ : ndarray of shape (n_classes,)
    category_count_ : list of n_features arrays of shape (n_classes, n_categories_[j])
        Weighted number of samples per class and category of each feature.
    feature_log_prob_ : list of n_features arrays of shape (n_classes, n_categories_[j])
        Empirical log probability of the categories given a class.
    n_categories_ : ndarray of shape (n_features,), dtype int64
        Number of categories of each feature.
    categories_ : list of n_features arrays
        The category values of each feature (``arange(n_categories_[j])`` for integer codes).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When X was a dataframe with string column names.

    Notes
    -----
    ``partial_fit`` may grow the categories; ``n_categories_`` is then computed over all data
    seen (scikit-learn recomputes it from the latest batch only).

    Examples
    --------
    >>> import pandas as pd
    >>> from dml.naive_bayes import CategoricalNB
    >>> X = pd.DataFrame({"sky": ["sun", "rain", "sun", "cloud"], "wind": [0, 1, 1, 0]})
    >>> y = ["yes", "no", "yes", "no"]
    >>> clf = CategoricalNB().fit(X, y)
    >>> clf.categories_
    [array(['cloud', 'rain', 'sun'], dtype=object), array([0, 1])]
    >>> clf.category_count_[0]
    array([[1., 1., 0.],
           [0., 0., 2.]])
    >>> clf.predict(pd.DataFrame({"sky": ["sun"], "wind": [0]}))
    array(['yes'], dtype='<U3')
    """

    _kind = "categorical"
    _block_spec = BlockSpec(numeric=False)
    _parameter_constraints = {
        **_BaseDiscreteNB._parameter_constraints,
        "min_categories": [Interval(Integral, 1, None, closed="left"), "array-like", None]}
    _array_alpha = False
    _positive_only = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 min_categories=None, missing="error"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.min_categories = min_categories
        self.missing = missing

    def _spec_overrides(self) -> dict:
        return {}  # non-numeric blocks: missing values are handled by the kernels

    def _prepare(self, X, blocks, first):
        name = type(self).__name__
        kinds, declared = _feature_kinds(X, blocks)
        if first:
            self._kinds, self._declared = kinds, declared
            return
        if kinds != self._kinds:
            raise ValueError(f"{name}: the feature kinds {kinds} (integer codes vs labels) "
                             f"differ from those of the first partial_fit call {self._kinds}.")
        for j, dec in enumerate(declared):
            old = self._declared[j]
            if dec is not None and old is not None:
                extra = [c for c in dec if c not in set(old)]
                self._declared[j] = np.asarray(list(old) + extra, dtype=object)

    def _min_categories(self):
        mc = self.min_categories
        if mc is None:
            return None
        arr = np.array(mc)
        if not np.issubdtype(arr.dtype, np.signedinteger):
            raise ValueError(f"CategoricalNB: 'min_categories' should have integral type. Got "
                             f"{arr.dtype} instead.")
        if arr.ndim == 0:
            if arr < 1:
                raise ValueError("CategoricalNB: min_categories must be >= 1.")
            return np.full(self.n_features_in_, int(arr), dtype=np.int64)
        if arr.shape != (self.n_features_in_,):
            raise ValueError(f"CategoricalNB: 'min_categories' should have shape "
                             f"({self.n_features_in_},) when an array-like is provided. Got "
                             f"{arr.shape} instead.")
        return arr.astype(np.int64)

    def _reduce(self, blocks):
        names = getattr(self, "feature_names_in_", None)
        return blocks.map_reduce(_categorical_block, self._kinds, self.missing, names,
                                 type(self).__name__, combine=_categorical_combine,
                                 with_index=True)

    def _combine(self, parts):
        return _categorical_combine(parts)

    def _empty_stats(self, classes, d):
        L = len(classes)
        feats = [(np.zeros(0, dtype=np.int64 if k == "code" else object), np.zeros((L, 0)))
                 for k in self._kinds]
        return {"classes": classes, "class_count": np.zeros(L), "features": feats}

    def _finalise(self, stats):
        alpha = self._check_alpha()
        min_cat = self._min_categories()
        L = len(stats["classes"])
        counts, categories, n_cats = [], [], []
        for j, (keys, cnt) in enumerate(stats["features"]):
            if self._kinds[j] == "code":
                n = int(keys.max()) + 1 if len(keys) else 0
                if min_cat is not None:
                    n = max(n, int(min_cat[j]))
                full = np.zeros((L, n))
                full[:, keys] = cnt
                cats = np.arange(n)
            elif self._declared[j] is None:
                full, cats = cnt.copy(), keys
            else:
                cats = self._declared[j]
                pos = pd.Index(cats).get_indexer(keys) if len(keys) else np.zeros(0, int)
                if (pos < 0).any():
                    raise ValueError(f"CategoricalNB: feature {_feature_label(self._names(), j)}"
                                     f" has values {list(keys[pos < 0])} that are not among "
                                     "its declared categories.")
                full = np.zeros((L, len(cats)))
                full[:, pos] = cnt
            counts.append(full)
            categories.append(cats)
            n_cats.append(full.shape[1])
        self.category_count_ = counts
        self.categories_ = categories
        self.n_categories_ = np.asarray(n_cats, dtype=np.int64)
        self.class_count_ = stats["class_count"].copy()
        flp = []
        for cc in counts:
            smoothed = cc + alpha
            flp.append(np.log(smoothed) - np.log(smoothed.sum(axis=1).reshape(-1, 1)))
        self.feature_log_prob_ = flp
        self.class_log_prior_ = self._class_log_prior(self.class_count_)

    def _names(self):
        return getattr(self, "feature_names_in_", None)

    def _jll_params(self):
        return (self.feature_log_prob_, self.class_log_prior_, self._kinds, self.categories_,
                self.missing, self._names(), type(self).__name__)


def _feature_kinds(X, blocks):
    """Per feature: "code" (integer codes) or "label"; and the declared categories or None."""
    if blocks.dtypes is not None:
        dtypes = list(blocks.dtypes)
    else:
        dtype = X.dtype if hasattr(X, "dtype") else np.asarray(X).dtype
        dtypes = [dtype] * blocks.n_features
    kinds, declared = [], []
    for t in dtypes:
        if isinstance(t, pd.CategoricalDtype):
            kinds.append("label")
            cats = t.categories
            known = cats is not None and not (len(cats) == 1 and
                                              cats[0] == "__UNKNOWN_CATEGORIES__")
            declared.append(np.asarray(cats, dtype=object) if known else None)
        elif pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t):
            kinds.append("code")
            declared.append(None)
        else:
            kinds.append("label")
            declared.append(None)
    return kinds, declared
