"""The linear model as an optimisation problem: f(x) = W x + b with a loss on f.

Parameters are one flat vector ``[W.ravel(), b]`` with ``W`` of shape (K, d) (K = 1 for regression
and binary classification, K classes for one-vs-rest or multinomial) and ``b`` of length K when
there is an intercept; only ``W`` is penalised.

Targets are encoded once per block on its worker (:meth:`LinearProblem.prepare_block`): class
labels become indices into ``classes`` (a label outside them is an error naming it), class
weights are folded into the sample weights. The batch kernels then compute, vectorised over the
batch and over all K outputs at once,

* ``batch_loss_grad``: Σ wᵢ L and its gradient ``[Gᵀ X, Σ G]`` with ``G = w · dL/df`` (n × K);
* ``batch_hess``: the Hessian ``Σ_k,l [X 1]ᵀ diag(w · ∂²L/∂f_k∂f_l) [X 1]``
  (block-diagonal for one-vs-rest, full for softmax).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dml.optim._stacked_kernels import loss_code
from dml.optim.losses import Loss, Softmax
from dml.optim.problem import Problem

__all__ = ["LinearProblem", "decision_kernel", "encode_labels"]


def encode_labels(y, classes, estimator: str = "estimator") -> np.ndarray:
    """Indices of ``y``'s labels in the sorted ``classes``; a clear error for unknown labels."""
    y = np.asarray(y)
    try:
        idx = np.searchsorted(classes, y)
    except TypeError:
        raise TypeError(f"{estimator}: the labels in y cannot be compared with the classes "
                        f"{list(classes)} (mixed types?); use one label type") from None
    idx = np.clip(idx, 0, len(classes) - 1)
    bad = classes[idx] != y
    if np.any(bad):
        unseen = np.unique(y[bad])[:10].tolist()
        raise ValueError(f"{estimator}: y contains labels {unseen} that are not in the "
                         f"classes {classes.tolist()}. Pass every label in `classes` on the first "
                         "partial_fit call (or fit on all the data).")
    return idx.astype(np.intp)


def decision_kernel(X, coef, intercept):
    """``X @ coef.T + intercept``; a vector when there is one output."""
    out = X @ coef.T + intercept
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    return out


class LinearProblem(Problem):
    """See the module docstring.

    Parameters
    ----------
    n_features : int
    loss : Loss
    task : {"regression", "binary", "ovr", "multinomial"}
    n_outputs : int
        K (1 for regression and binary).
    fit_intercept : bool
    classes : ndarray, optional
        Sorted class labels (classification).
    class_weight : ndarray, optional
        Weight per class, in the order of ``classes``.
    estimator : str
        Name for error messages.
    """

    steps_cheaper_than_params = True

    def __init__(self, n_features: int, loss: Loss, *, task: str = "regression",
                 n_outputs: int = 1, fit_intercept: bool = True, classes=None,
                 class_weight=None, estimator: str = "estimator"):
        self.d = int(n_features)
        self.K = int(n_outputs)
        self.loss = loss
        self.task = task
        self.fit_intercept = bool(fit_intercept)
        self.classes = None if classes is None else np.asarray(classes)
        self.class_weight = None if class_weight is None else np.asarray(class_weight, float)
        self.estimator = estimator
        self.n_params = self.K * self.d + (self.K if self.fit_intercept else 0)
        self.penalised = slice(0, self.K * self.d)

    def __dask_tokenize__(self):
        return ("LinearProblem", self.d, self.K, repr(self.loss), self.task, self.fit_intercept,
                None if self.classes is None else tuple(self.classes.tolist()),
                None if self.class_weight is None else tuple(self.class_weight.tolist()))

    # ---- layout ----
    def unpack(self, params):
        W = params[:self.K * self.d].reshape(self.K, self.d)
        b = params[self.K * self.d:] if self.fit_intercept else np.zeros(self.K, params.dtype)
        return W, b

    def pack(self, W, b=None) -> np.ndarray:
        parts = [np.asarray(W, dtype=np.float64).reshape(-1)]
        if self.fit_intercept:
            parts.append(np.zeros(self.K) if b is None else
                         np.asarray(b, dtype=np.float64).reshape(-1))
        return np.concatenate(parts)

    # ---- data ----
    def prepare_block(self, X, y, w):
        if self.task == "regression":
            Y = np.asarray(y, dtype=np.float64)
        else:
            Y = encode_labels(y, self.classes, self.estimator)
            if self.class_weight is not None:
                cw = self.class_weight[Y]
                w = cw if w is None else np.asarray(w, dtype=np.float64) * cw
        if w is not None:
            w = np.asarray(w, dtype=np.float64)
        return X, Y, w

    def _targets(self, Y):
        """Targets in the loss's convention: ±1 (binary / one-vs-rest), indices, or values."""
        if self.task == "binary":
            return 2.0 * Y - 1.0
        if self.task == "ovr":
            return np.where(Y[:, None] == np.arange(self.K), 1.0, -1.0)
        return Y

    def decision(self, params, X):
        W, b = self.unpack(params)
        F = X @ W.T
        if self.fit_intercept:
            F += b
        if self.K == 1 and self.task != "multinomial":
            return F[:, 0]
        return F

    # ---- kernels ----
    def batch_loss_grad(self, params, X, Y, w):
        F = self.decision(params, X)
        loss, G = self.loss.loss_grad(F, self._targets(Y))
        if w is not None:
            G = G * (w[:, None] if G.ndim == 2 else w)
            loss_sum = float(np.dot(w, loss if loss.ndim == 1 else loss.sum(axis=1)))
        else:
            loss_sum = float(loss.sum())
        grad = np.empty(self.n_params, dtype=params.dtype)
        Kd = self.K * self.d
        if G.ndim == 1:
            grad[:Kd] = X.T @ G
            if self.fit_intercept:
                grad[Kd] = G.sum()
        else:
            grad[:Kd] = (G.T @ X).ravel()
            if self.fit_intercept:
                grad[Kd:] = G.sum(axis=0)
        return loss_sum, grad

    def unpack_views(self, params):
        """``(W, b)`` as views of ``params`` (b None without an intercept), for in-place steps."""
        W = params[:self.K * self.d].reshape(self.K, self.d)
        return W, (params[self.K * self.d:] if self.fit_intercept else None)

    def sparse_kernel_terms(self, Y):
        """``(loss code, loss parameter, targets (n, K))`` for the compiled sparse steps, or None
        when the loss couples the outputs (softmax) or is not compiled."""
        lc = None if self.task == "multinomial" else loss_code(self.loss)
        if lc is None:
            return None
        T = np.ascontiguousarray(self._targets(Y), dtype=np.float64).reshape(len(Y), -1)
        return lc[0], lc[1], T

    def sparse_batch_grad(self, W, scale, b, n, rows, cols, values, Y, w):
        """:meth:`batch_loss_grad` of n sparse rows with weights ``scale · W``, at O(nnz).

        The rows are given by their stored entries: ``rows`` (0..n-1), ``cols``, ``values``.
        Returns ``(loss_sum, cols, gW, gb)``: the columns the batch holds (sorted), the
        gradient sums of ``W`` on those columns (K × len(cols)) and of the intercepts (K,).
        The scaled-weights form is what :mod:`dml.optim.sparse_steps` keeps.
        """
        used, inv = np.unique(cols, return_inverse=True)
        F = np.empty((n, self.K))
        for k in range(self.K):
            F[:, k] = np.bincount(rows, weights=values * W[k, cols], minlength=n)
        F *= scale
        if self.fit_intercept:
            F += b
        if self.K == 1 and self.task != "multinomial":
            F = F[:, 0]
        loss, G = self.loss.loss_grad(F, self._targets(Y))
        if w is not None:
            G = G * (w[:, None] if G.ndim == 2 else w)
            loss_sum = float(np.dot(w, loss if loss.ndim == 1 else loss.sum(axis=1)))
        else:
            loss_sum = float(loss.sum())
        G = G.reshape(n, -1)
        gW = np.empty((self.K, len(used)))
        for k in range(self.K):
            gW[k] = np.bincount(inv, weights=values * G[rows, k], minlength=len(used))
        return loss_sum, used, gW, G.sum(axis=0)

    def stack_targets(self, Y) -> np.ndarray:
        """Per-row targets in the loss's convention, for :meth:`batch_loss_grad_stacked`."""
        return self._targets(Y)

    @property
    def stacked_width(self) -> int:
        """Columns of the batches :meth:`batch_loss_grad_stacked` takes: with one output and an
        intercept, X with a column of ones appended, so that the parameter vector ``[w, b]`` is
        one row of the product and its whole gradient one product (no separate sums)."""
        return self.d + 1 if (self.K == 1 and self.fit_intercept) else self.d

    def batch_loss_grad_stacked(self, P, X, T, w):
        """:meth:`batch_loss_grad` of a grid of models, each group on its own batch.

        ``P`` has shape (G, m, n_params): m models in each of G groups; group g's batch is
        ``X[g]`` (B × :attr:`stacked_width`) with targets ``T[g]`` (from
        :meth:`stack_targets`) and row weights ``w[g]`` (0 for padding rows; None when every row
        counts once). Returns the loss sums (G, m) and the gradients (G, m, n_params). All
        decision values of a group come from one product ``X Wᵀ`` and all its gradients from one
        ``Gᵀ X``: a step for G·m models costs about what a step for one does (the stacked
        trainer, :mod:`dml.optim.stacked`).
        """
        if isinstance(self.loss, Softmax):
            raise NotImplementedError("the softmax loss couples the outputs; fit one model at a "
                                      "time")
        G, m = P.shape[:2]
        K, d = self.K, self.d
        Kd = K * d
        augmented = X.shape[2] == d + 1  # [X 1] (stacked_width): [w, b] in one product
        if augmented:
            F = np.matmul(X, P.transpose(0, 2, 1))
        else:
            # Model-major columns: column j of group g is output j % K of model j // K.
            F = np.matmul(X, P[:, :, :Kd].reshape(G, m * K, d).transpose(0, 2, 1))
            if self.fit_intercept:
                F += P[:, :, Kd:].reshape(G, 1, m * K)
        T = T[:, :, None] if T.ndim == 2 else np.tile(T, (1, 1, m))
        loss, D = self.loss.loss_grad(F, T)
        if w is None:  # full batches of unweighted rows
            sums = loss.sum(axis=1)
        else:
            D = D * w[:, :, None]
            sums = np.matmul(w[:, None, :], loss)[:, 0, :]
        if augmented:
            return sums, np.matmul(D.transpose(0, 2, 1), X)
        grad = np.empty((G, m, self.n_params), dtype=P.dtype)
        grad[:, :, :Kd] = np.matmul(D.transpose(0, 2, 1), X).reshape(G, m, Kd)
        if self.fit_intercept:
            grad[:, :, Kd:] = D.sum(axis=1).reshape(G, m, K)
        return sums.reshape(G, m, K).sum(axis=2), grad

    def batch_line_losses(self, base, direction, steps, X, Y, w):
        """Loss sums at ``base + s · direction``: f is linear in the parameters, so
        f(base + s d) = f(base) + s (f(d) − b_d) with one product for all steps."""
        F0 = self.decision(base, X)
        Wd, bd = self.unpack(direction)
        Fd = X @ Wd.T
        if self.fit_intercept:
            Fd += bd
        if F0.ndim == 1:
            Fd = Fd[:, 0]
        T = self._targets(Y)
        out = []
        for s in steps:
            loss = self.loss.loss(F0 + s * Fd, T)
            if loss.ndim == 2:
                loss = loss.sum(axis=1)
            out.append(float(loss.sum() if w is None else np.dot(w, loss)))
        return out

    def _index(self, k):
        """Positions of output k's weights and intercept in the flat vector."""
        idx = np.arange(k * self.d, (k + 1) * self.d)
        if self.fit_intercept:
            idx = np.append(idx, self.K * self.d + k)
        return idx

    def _gram(self, X, s, Xs_sqrt=False):
        """``[X 1]ᵀ diag(s) [X 1]`` without building [X 1]."""
        d = self.d
        size = d + (1 if self.fit_intercept else 0)
        out = np.empty((size, size))
        if sp.issparse(X):  # sparse products; only the (d, d) result is dense
            out[:d, :d] = (X.T @ sp.csr_matrix(X.multiply(s[:, None]))).toarray()
        elif Xs_sqrt:  # s ≥ 0: a symmetric product (numpy uses syrk for A.T @ A)
            Xs = X * np.sqrt(s)[:, None]
            out[:d, :d] = Xs.T @ Xs
        else:
            out[:d, :d] = X.T @ (X * s[:, None])
        if self.fit_intercept:
            v = X.T @ s
            out[:d, d] = v
            out[d, :d] = v
            out[d, d] = s.sum()
        return out

    def batch_hess(self, params, X, Y, w):
        H = np.zeros((self.n_params, self.n_params))
        F = self.decision(params, X)
        if isinstance(self.loss, Softmax):
            P = Softmax.proba(F)
            ww = np.ones(X.shape[0]) if w is None else w
            for k in range(self.K):
                ik = self._index(k)
                for l in range(k, self.K):
                    s = ww * P[:, k] * ((k == l) - P[:, l])
                    block = self._gram(X, s, Xs_sqrt=False)
                    il = self._index(l)
                    H[np.ix_(ik, il)] = block
                    if l != k:
                        H[np.ix_(il, ik)] = block.T
            return H
        h = self.loss.hess(F, self._targets(Y))
        if w is not None:
            h = h * (w[:, None] if h.ndim == 2 else w)
        if h.ndim == 1:
            nz = h != 0
            if nz.mean() < 0.5:  # hinge-type losses: only rows with curvature contribute
                X, h = X[nz], h[nz]
            H[:] = self._gram(X, h, Xs_sqrt=True)
        else:
            for k in range(self.K):
                ik = self._index(k)
                H[np.ix_(ik, ik)] = self._gram(X, h[:, k], Xs_sqrt=True)
        return H

    # ---- validation score: accuracy (classification) or R² (regression) ----
    def score_stats(self, params, X, Y, w):
        F = self.decision(params, X)
        ww = np.ones(X.shape[0]) if w is None else w
        if self.task == "regression":
            r = Y - F
            return np.array([ww.sum(), ww @ Y, ww @ (Y * Y), ww @ (r * r)])
        pred = (F > 0).astype(np.intp) if F.ndim == 1 else np.argmax(F, axis=1)
        return np.array([ww @ (pred == Y), ww.sum()])

    def score_from_stats(self, stats) -> float:
        if self.task == "regression":
            sw, sy, syy, sres = stats
            tot = syy - sy * sy / sw
            return float(1.0 - sres / tot) if tot > 0 else 0.0
        return float(stats[0] / stats[1])
