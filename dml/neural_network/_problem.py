"""The multi-layer perceptron as an optimisation problem of :mod:`dml.optim`.

Parameters are one flat vector: every layer's weights first (layer by layer, each a
``(fan_in, fan_out)`` matrix in C order, scikit-learn's ``coefs_`` layout), then every layer's
biases. Only the leading weight part is penalised, so the engine's penalty is one slice, and the
per-layer matrices are views of the vector (:meth:`MLPProblem.unpack`).

Forward and backward passes are vectorised over the whole mini-batch (one matrix product per
layer and direction, no per-sample loop):

* ``a⁽⁰⁾ = x``, ``z⁽ˡ⁾ = a⁽ˡ⁻¹⁾ W⁽ˡ⁾ + b⁽ˡ⁾``, ``a⁽ˡ⁾ = h(z⁽ˡ⁾)`` (inverted dropout on hidden
  layers during training: keep with probability ``1 − dropout``, scale by ``1/(1 − dropout)``);
* output identity + ½‖p − y‖² (regression), logistic + binary cross-entropy (two classes),
  softmax + categorical cross-entropy (more); all three have ``δ⁽ᴸ⁾ = p − y``;
* ``δ⁽ˡ⁾ = (δ⁽ˡ⁺¹⁾ W⁽ˡ⁺¹⁾ᵀ) ⊙ h'(z⁽ˡ⁾)``, ``∂W⁽ˡ⁾ = a⁽ˡ⁻¹⁾ᵀ δ⁽ˡ⁾``, ``∂b⁽ˡ⁾ = Σ δ⁽ˡ⁾``.

See docs/neural_network.md.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from dml.linear_model._problem import encode_labels
from dml.optim.problem import Problem

__all__ = ["MLPProblem", "forward", "ACTIVATIONS", "OUTPUTS"]

ACTIVATIONS = ("identity", "logistic", "tanh", "relu")
OUTPUTS = ("identity", "logistic", "softmax")


def _activate(Z, name):
    """h(Z) in place (Z is a fresh array)."""
    if name == "relu":
        np.maximum(Z, 0, out=Z)
    elif name == "tanh":
        np.tanh(Z, out=Z)
    elif name == "logistic":
        expit(Z, out=Z)
    return Z


def _derivative(G, A, name):
    """G ⊙ h'(z) in place, written with the activation A = h(z)."""
    if name == "relu":
        G *= A > 0
    elif name == "tanh":
        G *= 1 - A * A
    elif name == "logistic":
        G *= A * (1 - A)
    return G


def _softmax(Z):
    Z = Z - Z.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


def forward(X, coefs, intercepts, activation, output):
    """The network's output for the rows of X (no dropout); scikit-learn's ``_forward_pass``."""
    A = X
    last = len(coefs) - 1
    for i, (W, b) in enumerate(zip(coefs, intercepts)):
        Z = A @ W
        Z += b
        A = _activate(Z, activation) if i < last else Z
    if output == "logistic":
        return expit(A)
    if output == "softmax":
        return _softmax(A)
    return A


class MLPProblem(Problem):
    """See the module docstring.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_features, *hidden, n_outputs]``.
    activation : {"identity", "logistic", "tanh", "relu"}
    output : {"identity", "logistic", "softmax"}
    classes : ndarray, optional
        Sorted labels (classification).
    dropout : float
        Drop probability of every hidden unit during training.
    init : {"glorot", "he"}
    dtype : float32 or float64
    estimator : str
    """

    def __init__(self, layer_sizes, activation="relu", output="identity", *, classes=None,
                 dropout=0.0, init="glorot", dtype=np.float64, estimator="MLP"):
        self.sizes = tuple(int(s) for s in layer_sizes)
        self.activation = activation
        self.output = output
        self.classes = None if classes is None else np.asarray(classes)
        self.dropout = float(dropout)
        self.init = init
        self.dtype = np.dtype(dtype).type
        self.estimator = estimator
        shapes = list(zip(self.sizes[:-1], self.sizes[1:]))
        self.shapes = shapes
        self.n_weights = int(sum(a * b for a, b in shapes))
        self.n_params = self.n_weights + int(sum(self.sizes[1:]))
        self.penalised = slice(0, self.n_weights)
        self.stochastic = self.dropout > 0

    def __dask_tokenize__(self):
        return ("MLPProblem", self.sizes, self.activation, self.output, self.dropout, self.init,
                np.dtype(self.dtype).str,
                None if self.classes is None else tuple(map(str, self.classes.tolist())))

    # ---- layout ----
    def unpack(self, params):
        """(coefs, intercepts): lists of views into ``params``."""
        coefs, intercepts = [], []
        w = 0
        b = self.n_weights
        for fan_in, fan_out in self.shapes:
            coefs.append(params[w:w + fan_in * fan_out].reshape(fan_in, fan_out))
            intercepts.append(params[b:b + fan_out])
            w += fan_in * fan_out
            b += fan_out
        return coefs, intercepts

    def pack(self, coefs, intercepts) -> np.ndarray:
        """The flat vector of scikit-learn-shaped ``coefs``/``intercepts`` (checked)."""
        if len(coefs) != len(self.shapes) or len(intercepts) != len(self.shapes):
            raise ValueError(f"{self.estimator}: expected {len(self.shapes)} weight matrices and "
                             f"bias vectors, got {len(coefs)} and {len(intercepts)}")
        parts_w, parts_b = [], []
        for i, ((fan_in, fan_out), W, b) in enumerate(zip(self.shapes, coefs, intercepts)):
            W = np.asarray(W, dtype=self.dtype)
            b = np.asarray(b, dtype=self.dtype).reshape(-1)
            if W.shape != (fan_in, fan_out) or b.shape != (fan_out,):
                raise ValueError(f"{self.estimator}: layer {i} weights have shape {W.shape} and "
                                 f"biases {b.shape}; expected {(fan_in, fan_out)} and "
                                 f"{(fan_out,)}")
            parts_w.append(W.reshape(-1))
            parts_b.append(b)
        return np.concatenate(parts_w + parts_b)

    def init_params(self, rng):
        """Glorot uniform ±√(6/(fan_in + fan_out)) or He uniform ±√(6/fan_in); biases 0."""
        params = np.zeros(self.n_params, dtype=self.dtype)
        coefs, _ = self.unpack(params)
        for (fan_in, fan_out), W in zip(self.shapes, coefs):
            bound = np.sqrt(6.0 / (fan_in + fan_out) if self.init == "glorot" else 6.0 / fan_in)
            W[...] = rng.uniform(-bound, bound, size=W.shape)
        return params

    # ---- data ----
    def prepare_block(self, X, y, w):
        # Sparse X stays sparse: only the first layer reads it, as sparse products.
        X = X.astype(self.dtype, copy=False) if sp.issparse(X) else np.asarray(X, self.dtype)
        if self.classes is None:
            Y = np.asarray(y, dtype=self.dtype).reshape(-1, 1)
        else:
            Y = encode_labels(y, self.classes, self.estimator)
        if w is not None:
            w = np.asarray(w, dtype=self.dtype)
        return X, Y, w

    def _onehot(self, Y, n):
        """Targets as an (n, n_outputs) array in the output's convention."""
        if self.classes is None:
            return Y
        if self.output == "logistic":
            return Y.reshape(-1, 1).astype(self.dtype)
        T = np.zeros((n, self.sizes[-1]), dtype=self.dtype)
        T[np.arange(n), Y] = 1
        return T

    # ---- kernels ----
    def batch_loss_grad(self, params, X, Y, w, rng=None):
        coefs, intercepts = self.unpack(params)
        n = X.shape[0]
        last = len(coefs) - 1
        keep = 1.0 - self.dropout
        acts = [X]
        masks = []
        A = X
        for i, (W, b) in enumerate(zip(coefs, intercepts)):
            Z = A @ W
            Z += b
            if i < last:
                A = _activate(Z, self.activation)
                if rng is not None and self.dropout > 0:
                    m = (rng.random(A.shape, dtype=np.float64) < keep).astype(self.dtype)
                    m /= keep
                    A *= m
                    masks.append(m)
                else:
                    masks.append(None)
                acts.append(A)
            else:
                F = Z
        T = self._onehot(Y, n) if self.output != "softmax" else None
        if self.output == "identity":
            G = F - T
            loss = 0.5 * np.einsum("ij,ij->i", G, G)
        elif self.output == "logistic":
            loss = (np.logaddexp(0, F) - T * F)[:, 0]
            G = expit(F) - T
        else:
            rows = np.arange(n)
            shifted = F - F.max(axis=1, keepdims=True)
            G = np.exp(shifted)
            total = G.sum(axis=1)
            loss = np.log(total) - shifted[rows, Y]
            G /= total[:, None]
            G[rows, Y] -= 1
        if w is None:
            loss_sum = float(loss.sum())
        else:
            loss_sum = float(np.dot(w, loss))
            G *= w[:, None]
        grad = np.empty(self.n_params, dtype=params.dtype)
        gcoefs, gints = self.unpack(grad)
        for i in range(last, -1, -1):
            gcoefs[i][...] = acts[i].T @ G
            gints[i][...] = G.sum(axis=0)
            if i > 0:
                G = G @ coefs[i].T
                if masks[i - 1] is not None:
                    # a = h(z)·m with m ∈ {0, 1/keep}: the gradient flows through kept units.
                    G *= masks[i - 1]
                    _derivative(G, _unmasked(acts[i], masks[i - 1]), self.activation)
                else:
                    _derivative(G, acts[i], self.activation)
        return loss_sum, grad

    def predict_output(self, params, X):
        coefs, intercepts = self.unpack(params)
        return forward(X, coefs, intercepts, self.activation, self.output)

    # ---- validation score: accuracy (classification) or R² (regression), as scikit-learn ----
    def score_stats(self, params, X, Y, w):
        P = self.predict_output(params, X)
        ww = np.ones(X.shape[0]) if w is None else np.asarray(w, np.float64)
        if self.classes is None:
            y = Y[:, 0].astype(np.float64)
            r = y - P[:, 0]
            return np.array([ww.sum(), ww @ y, ww @ (y * y), ww @ (r * r)])
        pred = (P[:, 0] > 0.5).astype(np.intp) if self.output == "logistic" else P.argmax(1)
        return np.array([ww @ (pred == Y), ww.sum()])

    def score_from_stats(self, stats) -> float:
        if self.classes is None:
            sw, sy, syy, sres = stats
            tot = syy - sy * sy / sw
            return float(1.0 - sres / tot) if tot > 0 else 0.0
        return float(stats[0] / stats[1])


def _unmasked(A, mask):
    """h(z) from the dropped-out activation A = h(z)·mask (entries with mask 0 do not matter:
    their gradient is already zero)."""
    out = np.zeros_like(A)
    np.divide(A, mask, out=out, where=mask != 0)
    return out
