"""Per-block maths of the decompositions: NumPy (or SciPy sparse) in, small statistics out.

Every fit of :mod:`dml.decomposition` is a map over row blocks followed by a fixed-order tree
of merges. The kernels here are the two halves: a function of one block and a merge of a list
of block results. None of them needs a cluster; ``tests/test_decomposition.py`` checks them on
plain arrays.

The statistics are kept *centred per group*: a block reports its row count ``n``, its mean
``m`` and quantities about its rows minus ``m`` (the scatter ``S = Xc.T @ Xc``, an R factor of
``Xc``, or ``S @ Omega``). Merging groups adds the within-group parts and the between-group
part ``sum_i n_i (m_i - m)(m_i - m).T`` (Chan, Golub and LeVeque's pairwise update in matrix
form). No sum of squares of raw values is ever formed, so data far from the origin lose no
precision (``docs/decomposition.md``).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

__all__ = ["scatter_kernel", "merge_scatter", "qr_kernel", "merge_qr", "project_kernel",
           "merge_project", "gram_product_kernel", "incremental_update", "incremental_block",
           "batch_bounds", "svd_flip_v"]


# --------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------

def _as_float(xb):
    """A block as float64 (dense: an array; sparse: CSR)."""
    if sp.issparse(xb):
        return sp.csr_array(xb, dtype=np.float64)
    return np.asarray(xb, dtype=np.float64)


def _mean(x) -> np.ndarray:
    n = x.shape[0]
    if n == 0:
        return np.zeros(x.shape[1])
    return np.asarray(x.sum(axis=0)).ravel() / n


def _merged_mean(parts):
    """(n, mean) of the union of groups given as ``[(n_i, mean_i, ...), ...]``."""
    n = sum(p[0] for p in parts)
    if n == 0:
        return 0, parts[0][1]
    # Offsets from the first group's mean: the merged mean keeps full precision far from zero.
    base = parts[0][1]
    mean = base + sum(p[0] * (p[1] - base) for p in parts[1:]) / n
    return n, mean


def _nonempty(parts):
    parts = [p for p in parts if p is not None]
    kept = [p for p in parts if p[0] > 0]
    return kept or parts[:1]


def svd_flip_v(vt: np.ndarray) -> np.ndarray:
    """scikit-learn's sign rule (``svd_flip(u_based_decision=False)``): in every row of ``vt``
    the entry of largest magnitude (the first one on ties) is made positive.

    Examples
    --------
    >>> svd_flip_v(np.array([[0.6, -0.8], [0.8, 0.6]]))
    array([[-0.6,  0.8],
           [ 0.8,  0.6]])
    """
    vt = np.array(vt, dtype=np.float64, copy=True)
    if vt.size == 0:
        return vt
    idx = np.argmax(np.abs(vt), axis=1)
    signs = np.sign(vt[np.arange(vt.shape[0]), idx])
    signs[signs == 0] = 1.0
    return vt * signs[:, None]


# --------------------------------------------------------------------------------------------
# covariance: (n, mean, centred scatter)
# --------------------------------------------------------------------------------------------

def scatter_kernel(xb, yb=None, wb=None):
    """``(n, mean, S)`` of one block: ``S = (X - mean).T @ (X - mean)`` in float64.

    Dense blocks are centred before the product (``Xc.T @ Xc``, which NumPy computes with the
    symmetric BLAS update); sparse blocks use ``X.T @ X - n mean mean.T`` so that they stay
    sparse (the cancellation is within one block only).

    Examples
    --------
    >>> n, m, S = scatter_kernel(np.array([[1.0, 2.0], [3.0, 6.0]]))
    >>> n, m, S
    (2, array([2., 4.]), array([[2., 4.],
           [4., 8.]]))
    """
    x = _as_float(xb)
    n = x.shape[0]
    m = _mean(x)
    if sp.issparse(x):
        S = np.asarray((x.T @ x).todense()) - n * np.outer(m, m)
    else:
        xc = x - m
        S = xc.T @ xc
    return n, m, S


def merge_scatter(parts):
    """Merge ``(n, mean, S)`` of several groups into those of their union (fixed order).

    Examples
    --------
    >>> X = np.arange(12.0).reshape(6, 2) ** 2
    >>> n, m, S = merge_scatter([scatter_kernel(X[:2]), scatter_kernel(X[2:])])
    >>> bool(np.allclose(S, (X - X.mean(0)).T @ (X - X.mean(0))))
    True
    """
    parts = _nonempty(parts)
    if len(parts) == 1:
        return parts[0]
    n, mean = _merged_mean(parts)
    S = parts[0][2].copy()
    for p in parts[1:]:
        S += p[2]
    for p in parts:
        delta = p[1] - mean
        S += p[0] * np.outer(delta, delta)
    return n, mean, S


# --------------------------------------------------------------------------------------------
# TSQR: (n, mean, R) with R.T @ R = centred scatter
# --------------------------------------------------------------------------------------------

def _r_factor(a: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """The min(n, d)×d triangular factor of ``a`` (LAPACK's Householder QR, R only)."""
    if a.shape[0] == 0:
        return np.zeros((0, a.shape[1]))
    # LAPACK works on Fortran order: a Fortran copy it may overwrite saves it another copy.
    a = a if overwrite and a.flags.f_contiguous else np.array(a, dtype=np.float64, order="F")
    r = scipy.linalg.qr(a, mode="r", overwrite_a=True, check_finite=False)[0]
    return np.ascontiguousarray(r[:min(a.shape)])


def qr_kernel(xb, yb=None, wb=None):
    """``(n, mean, R)`` of one block: R is the triangular factor of the centred block.

    ``R.T @ R`` is the block's centred scatter, obtained without ever squaring the data: the
    conditioning of the problem is that of X, not of ``X.T @ X``.
    """
    x = np.asarray(_as_float(xb).todense() if sp.issparse(xb) else _as_float(xb))
    m = _mean(x)
    xc = np.array(x, order="F")
    xc -= m
    return x.shape[0], m, _r_factor(xc, overwrite=True)


def merge_qr(parts):
    """Merge ``(n, mean, R)`` of several groups: the R factor of their stacked R factors and
    one row ``sqrt(n_i) (mean_i - mean)`` per group (the between-group scatter)."""
    parts = _nonempty(parts)
    if len(parts) == 1:
        return parts[0]
    n, mean = _merged_mean(parts)
    rows = [p[2] for p in parts]
    rows.append(np.stack([np.sqrt(p[0]) * (p[1] - mean) for p in parts]))
    return n, mean, _r_factor(np.vstack(rows))


# --------------------------------------------------------------------------------------------
# randomized: (n, mean, Omega.T @ mean, S @ Omega, trace S)
# --------------------------------------------------------------------------------------------

def project_kernel(xb, yb, wb, omega):
    """``(n, mean, p, M, ss)`` of one block for a d×l test matrix ``omega``.

    ``M = Xc.T @ (Xc @ omega)`` (the block's centred scatter times ``omega``, without forming
    the d×d scatter), ``p = omega.T @ mean`` and ``ss = trace(Xc.T @ Xc)``. Only ``X @ A`` and
    ``X.T @ B`` products touch the block, so a sparse block works as it is.
    """
    x = _as_float(xb)
    n = x.shape[0]
    m = _mean(x)
    p = omega.T @ m
    if sp.issparse(x):
        M = x.T @ (x @ omega) - n * np.outer(m, p)
        ss = float(x.multiply(x).sum()) - n * float(m @ m)
    else:
        xc = x - m
        M = xc.T @ (xc @ omega)
        ss = float(np.einsum("ij,ij->", xc, xc))
    return n, m, p, M, ss


def merge_project(parts):
    """Merge ``(n, mean, p, M, ss)`` of several groups (see :func:`project_kernel`)."""
    parts = _nonempty(parts)
    if len(parts) == 1:
        return parts[0]
    n, mean = _merged_mean(parts)
    base = parts[0][2]
    p = base + sum(q[0] * (q[2] - base) for q in parts[1:]) / n
    M = parts[0][3].copy()
    ss = 0.0
    for q in parts:
        if q is not parts[0]:
            M += q[3]
        dm, dp = q[1] - mean, q[2] - p
        M += q[0] * np.outer(dm, dp)
        ss += q[4] + q[0] * float(dm @ dm)
    return n, mean, p, M, ss


def gram_product_kernel(xb, yb, wb, Q, mu):
    """``(X - mu).T @ ((X - mu) @ Q)`` of one block without forming ``X - mu``.

    The power passes of the randomized solvers, once the mean ``mu`` is known (zero for
    TruncatedSVD): two reads of the block (``X @ Q`` and ``X.T @ Y``) instead of centring a
    copy. Its rounding error grows with ``|mu| / spread`` (about 1e-10 relative at a mean 10⁶
    times the spread), far below the randomized method's own error; the first and last passes
    use the exactly centred :func:`project_kernel`. Merge with a plain sum.
    """
    x = _as_float(xb)
    if x.shape[0] == 0:
        return np.zeros((x.shape[1], Q.shape[1]))
    Y = x @ Q
    Y -= mu @ Q
    M = np.asarray(x.T @ Y)
    M -= np.outer(mu, Y.sum(axis=0))
    return M


# --------------------------------------------------------------------------------------------
# IncrementalPCA: scikit-learn's update, one batch at a time
# --------------------------------------------------------------------------------------------

def batch_bounds(n_rows: int, batch_size: int, min_batch_size: int) -> list[tuple[int, int]]:
    """scikit-learn's ``gen_batches``: consecutive batches of ``batch_size`` rows, a last batch
    shorter than ``min_batch_size`` joined to the one before.

    Examples
    --------
    >>> batch_bounds(7, 3, 2)
    [(0, 3), (3, 7)]
    """
    out, start = [], 0
    for _ in range(n_rows // batch_size):
        end = start + batch_size
        if end + min_batch_size > n_rows:
            continue
        out.append((start, end))
        start = end
    if start < n_rows:
        out.append((start, n_rows))
    return out


def _mean_var_update(x, last_mean, last_var, last_n):
    """scikit-learn's ``_incremental_mean_and_var`` for dense float64 X without NaN."""
    n = x.shape[0]
    new_sum = x.sum(axis=0)
    total = last_n + n
    last_sum = last_mean * last_n
    mean = (last_sum + new_sum) / total
    temp = x - new_sum / n
    correction = temp.sum(axis=0)
    new_unnorm = (temp * temp).sum(axis=0) - correction ** 2 / n
    if last_n == 0:
        unnorm = new_unnorm
    else:
        ratio = last_n / n
        unnorm = last_var * last_n + new_unnorm + ratio / total * (last_sum / ratio - new_sum) ** 2
    return mean, unnorm / total, total


def incremental_update(state, xb, n_components):
    """One IncrementalPCA step on a batch (scikit-learn's ``partial_fit`` arithmetic).

    ``state`` is None before the first batch, else the dict this function returned: the rows
    seen ``n``, per-feature ``mean`` and ``var``, the kept ``singular_values`` and
    ``components`` and the attributes derived from them (``explained_variance``,
    ``explained_variance_ratio``, ``noise_variance``).
    """
    x = np.array(np.asarray(xb.todense() if sp.issparse(xb) else xb), dtype=np.float64,
                 copy=True)
    n_rows, n_features = x.shape
    if state is None:
        n_seen, last_mean, last_var = 0, np.zeros(n_features), np.zeros(n_features)
    else:
        n_seen, last_mean, last_var = state["n"], state["mean"], state["var"]
    mean, var, total = _mean_var_update(x, last_mean, last_var, n_seen)
    if n_seen == 0:
        x -= mean
    else:
        batch_mean = x.mean(axis=0)
        x -= batch_mean
        correction = np.sqrt((n_seen / total) * n_rows) * (last_mean - batch_mean)
        x = np.vstack((state["singular_values"].reshape((-1, 1)) * state["components"], x,
                       correction))
    _, S, Vt = scipy.linalg.svd(x, full_matrices=False, check_finite=False)
    Vt = svd_flip_v(Vt)
    explained = S ** 2 / (total - 1)
    ratio = S ** 2 / np.sum(var * total)
    k = n_components
    noise = float(explained[k:].mean()) if k not in (n_rows, n_features) else 0.0
    # Fresh C-ordered copies: the fitted arrays do not keep the whole SVD alive, and a saved
    # and loaded model multiplies with the same memory layout (same BLAS path, same bits).
    return {"n": int(total), "mean": mean, "var": var,
            "singular_values": np.array(S[:k], order="C"),
            "components": np.array(Vt[:k], order="C"),
            "explained_variance": np.array(explained[:k], order="C"),
            "explained_variance_ratio": np.array(ratio[:k], order="C"), "noise_variance": noise}


def incremental_block(state, xb, n_components, batch_size, min_batch_size):
    """Run :func:`incremental_update` over the batches of one block, in row order."""
    for lo, hi in batch_bounds(xb.shape[0], batch_size, min_batch_size):
        state = incremental_update(state, xb[lo:hi], n_components)
    return state
