"""Naive Bayes prediction kernels: a NumPy block in, a NumPy block out, for every model kind."""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from dml.naive_bayes._categorical import _categorical_jll
from dml.naive_bayes._kernels import (_bernoulli_jll, _complement_jll, _gaussian_jll,
                                      _multinomial_jll)

_JLL = {"gaussian": _gaussian_jll, "multinomial": _multinomial_jll,
        "bernoulli": _bernoulli_jll, "complement": _complement_jll, "categorical": _categorical_jll}


def _nb_output(X, kind, params, classes, output):
    jll = _JLL[kind](X, *params)
    if output == "joint":
        return jll
    if output == "predict":
        return classes[np.argmax(jll, axis=1)]
    log_prob = jll - logsumexp(jll, axis=1).reshape(-1, 1)
    return log_prob if output == "log_proba" else np.exp(log_prob)


def _nb_score(X, y, w, kind, params, classes):
    """(weighted number of correct predictions, total weight) of one block."""
    if X.shape[0] == 0:
        return np.zeros(2)
    hit = (classes[np.argmax(_JLL[kind](X, *params), axis=1)] == y).astype(np.float64)
    if w is None:
        return np.array([hit.sum(), float(len(hit))])
    w = np.asarray(w, dtype=np.float64)
    return np.array([np.dot(w, hit), w.sum()])
