"""Gaussian-mixture kernels: the per-block E-step and the client-side M-step arithmetic.

Plain NumPy/SciPy functions, tested without a cluster. The log densities follow scikit-learn's
``sklearn.mixture._gaussian_mixture`` operation for operation (Cholesky factors of the
precisions, everything on the log scale), so that a distributed fit reproduces scikit-learn's
numbers.

One EM step is one pass over the blocks. Each block evaluates the responsibilities with the
current parameters and returns its sufficient statistics (:func:`block_moments`):

* ``n`` (k,): the responsibility sums of the components,
* ``s`` (k, d): the responsibility-weighted sums of the rows,
* ``m``: the weighted scatter of each component about the block's own weighted mean — (k, d, d)
  matrices for ``full``, (k, d) diagonals for ``diag``/``spherical``; for ``tied`` the block's
  total scatter about its row mean (``total``), from which the pooled within-component scatter
  follows (see :func:`m_step`),
* ``loglik``: the block's sum of per-row log-likelihoods (the EM lower bound's numerator).

Blocks are merged with the parallel-variance update of Chan, Golub and LeVeque
(:func:`merge_moments`): scatter matrices are centred at every level, so no sum of raw squares
of large numbers loses the small differences (scikit-learn's own diagonal and tied estimates
do subtract raw squares; on centred data both agree to round-off).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg
from scipy.special import logsumexp

__all__ = ["COVARIANCE_TYPES", "log_det_cholesky", "log_gaussian_prob", "log_prob_resp",
           "block_moments", "merge_moments", "combine_stats", "em_block", "init_block",
           "random_resp", "m_step", "precision_cholesky", "precision_cholesky_from_precisions",
           "precisions_of", "covariances_from_precisions", "score_block", "PAGE_ROWS"]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")

#: Rows per page of the ``init_params="random"`` responsibilities: page ``p`` of a run is drawn
#: from its own generator, so a row's draw depends on its global index, not the partitioning.
PAGE_ROWS = 4096

_ILL_DEFINED = ("Fitting the mixture model failed because some components have ill-defined "
                "empirical covariance (for instance caused by singleton or collapsed samples). "
                "Try to decrease the number of components, increase reg_covar, or scale the "
                "input data.")


# --------------------------------------------------------------------------------------------
# Log densities (scikit-learn's formulas)
# --------------------------------------------------------------------------------------------

def log_det_cholesky(prec_chol: np.ndarray, covariance_type: str, n_features: int):
    """Log-determinant of the precision Cholesky factors, one value per component."""
    if covariance_type == "full":
        k = prec_chol.shape[0]
        return np.sum(np.log(prec_chol.reshape(k, -1)[:, ::n_features + 1]), axis=1)
    if covariance_type == "tied":
        return np.sum(np.log(np.diag(prec_chol)))
    if covariance_type == "diag":
        return np.sum(np.log(prec_chol), axis=1)
    return n_features * np.log(prec_chol)


def log_gaussian_prob(X, means, prec_chol, covariance_type: str) -> np.ndarray:
    """``log N(x | mean_k, precision_k)`` for every row and component, shape (n, k)."""
    n, d = X.shape
    k = means.shape[0]
    log_det = log_det_cholesky(prec_chol, covariance_type, d)
    if covariance_type in ("full", "tied"):
        log_prob = np.empty((n, k), dtype=X.dtype)
        for j in range(k):
            pc = prec_chol[j] if covariance_type == "full" else prec_chol
            y = (X @ pc) - (means[j] @ pc)
            log_prob[:, j] = np.sum(np.square(y), axis=1)
    elif covariance_type == "diag":
        precisions = prec_chol ** 2
        log_prob = (np.sum(means ** 2 * precisions, axis=1) - 2.0 * (X @ (means * precisions).T)
                    + (X ** 2 @ precisions.T))
    else:
        precisions = prec_chol ** 2
        row_sq = np.einsum("ij,ij->i", X, X)
        log_prob = (np.sum(means ** 2, axis=1) * precisions - 2 * (X @ means.T * precisions)
                    + np.outer(row_sq, precisions))
    return -0.5 * (d * math.log(2 * math.pi) + log_prob) + log_det


def log_prob_resp(X, params) -> tuple[np.ndarray, np.ndarray]:
    """(log p(x) per row, log responsibilities (n, k)) for ``params = (type, weights, means,
    prec_chol)``."""
    covariance_type, weights, means, prec_chol = params
    weighted = log_gaussian_prob(X, means, prec_chol, covariance_type) + np.log(weights)
    norm = logsumexp(weighted, axis=1)
    with np.errstate(under="ignore"):
        log_resp = weighted - norm[:, None]
    return norm, log_resp


# --------------------------------------------------------------------------------------------
# Sufficient statistics of one block and their merge
# --------------------------------------------------------------------------------------------

def _safe_div(a, b):
    b = np.asarray(b)
    shape = b.shape + (1,) * (np.ndim(a) - b.ndim)
    bb = b.reshape(shape)
    return np.divide(a, bb, out=np.zeros_like(a, dtype=np.float64), where=bb > 0)


def block_moments(X: np.ndarray, resp: np.ndarray, covariance_type: str) -> dict:
    """Responsibility sums, weighted sums and centred scatter of one block (see module doc)."""
    n = resp.sum(axis=0)
    s = resp.T @ X
    out = {"n": n, "s": s}
    if covariance_type == "tied":
        rows = X.shape[0]
        mean = X.mean(axis=0) if rows else np.zeros(X.shape[1])
        Xc = X - mean
        out["total"] = {"n": np.array([float(rows)]), "s": (mean * rows)[None, :],
                        "m": (Xc.T @ Xc)[None]}
        return out
    means = _safe_div(s, n)
    if covariance_type == "full":
        m = np.empty((resp.shape[1], X.shape[1], X.shape[1]))
        for j in range(resp.shape[1]):
            diff = X - means[j]
            m[j] = (resp[:, j] * diff.T) @ diff
    else:
        # Centred at the block's column mean first: the raw-square form then only cancels the
        # (small) offset of each component from that mean.
        centre = X.mean(axis=0) if X.shape[0] else np.zeros(X.shape[1])
        Xc = X - centre
        mc = means - centre
        m = resp.T @ (Xc * Xc) - n[:, None] * mc ** 2
        np.maximum(m, 0.0, out=m)
    out["m"] = m
    return out


def merge_moments(a: dict, b: dict) -> dict:
    """Chan et al.'s pairwise update: the moments of the union of two row sets."""
    n = a["n"] + b["n"]
    out = {"n": n, "s": a["s"] + b["s"]}
    if "m" in a:
        delta = _safe_div(b["s"], b["n"]) - _safe_div(a["s"], a["n"])
        f = _safe_div(a["n"] * b["n"], n)
        if a["m"].ndim == 3:
            extra = f[:, None, None] * (delta[:, :, None] * delta[:, None, :])
        else:
            extra = f[:, None] * delta ** 2
        out["m"] = a["m"] + b["m"] + extra
    if "total" in a:
        out["total"] = merge_moments(a["total"], b["total"])
    return out


def _merge_stats(a: dict, b: dict) -> dict:
    out = merge_moments(a, b)
    if "loglik" in a:
        out["loglik"] = a["loglik"] + b["loglik"]
    return out


def combine_stats(parts: list) -> list:
    """Merge a list of per-block results (each a list with one statistics dict per run), in
    order. The reduction tree of :meth:`dml._blocks.Blocks.map_reduce` fixes the order."""
    out = list(parts[0])
    for p in parts[1:]:
        out = [_merge_stats(a, b) for a, b in zip(out, p)]
    return out


def em_block(xb, yb, wb, runs: list, covariance_type: str) -> list:
    """One E-step of every run on one block: its moments and summed log-likelihood."""
    out = []
    for weights, means, prec_chol in runs:
        norm, log_resp = log_prob_resp(xb, (covariance_type, weights, means, prec_chol))
        stats = block_moments(xb, np.exp(log_resp), covariance_type)
        stats["loglik"] = float(norm.sum())
        out.append(stats)
    return out


def score_block(xb, yb, wb, params) -> np.ndarray:
    """(Σ log p(x), rows) of one block."""
    norm, _ = log_prob_resp(xb, params)
    return np.array([norm.sum(), float(xb.shape[0])])


# --------------------------------------------------------------------------------------------
# Initial responsibilities
# --------------------------------------------------------------------------------------------

def random_resp(seed: int, start: int, rows: int, k: int) -> np.ndarray:
    """Uniform responsibilities, normalised per row, of global rows ``start .. start+rows-1``."""
    from dml._random import block_rng

    if rows == 0:
        return np.zeros((0, k))
    first, last = start // PAGE_ROWS, (start + rows - 1) // PAGE_ROWS
    pages = [block_rng(seed, "gmm-random-resp", p).uniform(size=(PAGE_ROWS, k))
             for p in range(first, last + 1)]
    u = np.concatenate(pages)[start - first * PAGE_ROWS:][:rows]
    return u / u.sum(axis=1)[:, None]


def init_block(index, xb, yb, wb, specs: list, offsets: np.ndarray, k: int,
               covariance_type: str) -> list:
    """Moments of one block under each run's initial responsibilities.

    ``specs``: ``("centres", C)`` — hard assignment to the nearest of the centres C (k-means
    initialisation); ``("random", seed)`` — :func:`random_resp`.
    """
    from dml.cluster._lloyd import assign

    out = []
    for kind, value in specs:
        if kind == "centres":
            resp = np.zeros((xb.shape[0], k))
            if xb.shape[0]:
                resp[np.arange(xb.shape[0]), assign(np.ascontiguousarray(xb), value)] = 1.0
        else:
            resp = random_resp(value, int(offsets[index]), xb.shape[0], k)
        out.append(block_moments(xb, resp, covariance_type))
    return out


# --------------------------------------------------------------------------------------------
# M-step and precisions (client side)
# --------------------------------------------------------------------------------------------

def m_step(stats: dict, reg_covar: float, covariance_type: str):
    """(nk, means, covariances) from merged moments, with scikit-learn's ``10 eps`` guard."""
    nk = stats["n"] + 10 * np.finfo(np.float64).eps
    means = stats["s"] / nk[:, None]
    if covariance_type == "full":
        cov = stats["m"] / nk[:, None, None]
        idx = np.arange(cov.shape[1])
        cov[:, idx, idx] += reg_covar
    elif covariance_type == "tied":
        total = stats["total"]
        centre = total["s"][0] / total["n"][0]
        offset = _safe_div(stats["s"], stats["n"]) - centre
        within = total["m"][0] - (stats["n"][:, None] * offset).T @ offset
        cov = within / nk.sum()
        cov.flat[::cov.shape[0] + 1] += reg_covar
    else:
        cov = stats["m"] / nk[:, None] + reg_covar
        if covariance_type == "spherical":
            cov = cov.mean(axis=1)
    return nk, means, cov


def precision_cholesky(covariances, covariance_type: str) -> np.ndarray:
    """Cholesky factors of the precisions (scikit-learn's ``_compute_precision_cholesky``)."""
    if covariance_type in ("full", "tied"):
        mats = covariances if covariance_type == "full" else covariances[None]
        d = mats.shape[-1]
        out = np.empty_like(mats)
        for j, cov in enumerate(mats):
            try:
                chol = linalg.cholesky(cov, lower=True)
            except linalg.LinAlgError:
                raise ValueError(_ILL_DEFINED) from None
            out[j] = linalg.solve_triangular(chol, np.eye(d), lower=True).T
        return out if covariance_type == "full" else out[0]
    if np.any(np.less_equal(covariances, 0.0)):
        raise ValueError(_ILL_DEFINED)
    return 1.0 / np.sqrt(covariances)


def _flip(a):
    return a[::-1, ::-1]


def precision_cholesky_from_precisions(precisions, covariance_type: str) -> np.ndarray:
    """Upper Cholesky factors ``U`` with ``precision = U Uᵀ`` (as scikit-learn computes them)."""
    if covariance_type == "full":
        return np.stack([_flip(linalg.cholesky(_flip(p), lower=True)) for p in precisions])
    if covariance_type == "tied":
        return _flip(linalg.cholesky(_flip(precisions), lower=True))
    return np.sqrt(precisions)


def precisions_of(prec_chol, covariance_type: str) -> np.ndarray:
    """Precisions from their Cholesky factors."""
    if covariance_type == "full":
        return np.einsum("kij,klj->kil", prec_chol, prec_chol)
    if covariance_type == "tied":
        return prec_chol @ prec_chol.T
    return prec_chol ** 2


def covariances_from_precisions(precisions, covariance_type: str) -> np.ndarray:
    """Covariances of given precisions (a fit of ``max_iter=0`` never estimates them)."""
    if covariance_type == "full":
        return np.stack([linalg.inv(p) for p in precisions])
    if covariance_type == "tied":
        return linalg.inv(precisions)
    return 1.0 / precisions
