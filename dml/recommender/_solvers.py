"""The two solvers of :class:`~dml.recommender.MatrixFactorization`, one epoch at a time.

A solver receives the fit's B² (user block, item block) *cells* — persisted arrays or paths of
cell files, see :mod:`dml.recommender._cells` — and advances a :class:`~dml.optim.state.TrainState`
whose ``arrays`` hold P, Q, b_u and b_i by one epoch: its :meth:`epoch` is the ``epoch_fn`` of
:func:`dml.optim.training.run_epochs`, which owns history, stopping and checkpoints. Everything
a solver adapts while it runs (the DSGD step size) lives in ``state.extra``, so a resumed fit
continues exactly where the checkpoint stopped.

Both solvers report the same objective, the one both minimise::

    (Σ e² + λ Σ_u n_u (‖p_u‖² + b_u²) + λ Σ_i n_i (‖q_i‖² + b_i²)) / n

with n_u, n_i the users' and items' numbers of ratings (``weighted_reg=False``, ALS only:
n_u = n_i = 1). SGD applies λ at every rating it visits, so a user with n_u ratings is shrunk
n_u times per epoch: its penalty is weighted by n_u whether or not that is intended.

DSGD (Gemulla, Nijkamp, Haas and Sismanis, KDD 2011)
----------------------------------------------------
Two cells that share no user block and no item block touch disjoint rows of P, Q, b_u, b_i, so
they can be trained in parallel with *sequential* SGD each, and the result is exactly what
visiting them one after the other gives. An epoch is B sub-epochs; sub-epoch s trains the B
cells (b, (b + s) mod B) in parallel, so every cell is visited once per epoch (the order of the
shifts is permuted per epoch from the seed, the ratings inside a cell per (epoch, cell)). A cell
task receives only its blocks' rows and returns them updated.

The step size follows the *bold driver* of the paper: after each epoch the training objective
is compared with the previous epoch's; if it fell, the step grows by 5 %, if it rose the step is
halved. Near P = Q ≈ 0 each factor's gradient is proportional to the other factor, so from
their small random start the factors grow only geometrically, by a factor that rises with the
step: with a step small enough for the end of training (the former default, 0.01) plain SGD
spent most of its epochs on this flat start, and 10 epochs of it ended barely below the
bias-only model on the ``mf_synthetic`` benchmark (test RMSE 1.07, ALS 0.64). The bold
driver lets the default step be large (η₀ = 0.05) and cuts it back once the objective stops
falling. Epoch e uses ``η_e = learning_rate · g_e / (1 + lr_decay · e)`` with g_e the bold
driver's product of 1.05s and 0.5s (1 without it). Unlike the paper, an epoch that raised
the objective is kept, not undone: halving is enough to recover, and a rejected epoch
would leave a hole in ``history_``.

Epochs are chained on the cluster, the bold driver included (see :class:`DSGDSolver`).

ALS
---
Per user block (its cells accumulated one after the other, so out of core only one cell is
read at a time) every user solves ``(Zᵀ Z + λ n_u I) x_u = Zᵀ t`` with ``z_i = [q_i, 1]``,
``x_u = [p_u, b_u]`` and ``t = r − μ − b_i`` (without biases ``z_i = q_i``, ``x_u = p_u``,
``t = r``); then the symmetric item step. Weighting λ by n_u, n_i is Zhou et al. 2008's
"weighted-λ", as in Spark MLlib; each half-step then exactly minimises the objective above,
which therefore never increases. With ``weighted_reg=False`` λ is the same for everyone, which
shrinks rarely rated users and items harder.
"""
from __future__ import annotations

import math
import struct
from operator import getitem

import dask
import numpy as np

from dml._blocks import block_rng
from dml._graph import LinkedTasks, broadcast
from dml.optim.training import EpochResult
from dml.recommender import _kernels

__all__ = ["DSGDSolver", "ALSSolver", "als_half_step", "read_cell_file", "write_cell_file",
           "objective", "EPOCHS_PER_SUBMIT"]

#: Bold driver: step factor after an epoch that lowered / raised the training objective.
BOLD_GROW = 1.05
BOLD_SHRINK = 0.5


# ---------------------------------------------------------------- cells and predictions
#: A spill file: this magic, then per array its dtype (8 ASCII bytes, padded) and length
#: (little-endian int64), then its bytes.
CELL_MAGIC = b"DMLCELL1"
_CELL_HEADER = struct.Struct("<8sq")


def write_cell_file(f, arrays):
    """Write 1-D arrays to the open binary file ``f`` in the spill-file layout."""
    # Not np.save: np.load parses each header with ast.literal_eval, and CPython 3.11 raises
    # "AST constructor recursion depth mismatch" when worker threads parse at the same time.
    f.write(CELL_MAGIC)
    for a in arrays:
        a = np.ascontiguousarray(a)
        f.write(_CELL_HEADER.pack(a.dtype.str.encode("ascii"), len(a)))
        f.write(a.tobytes())


def read_cell_file(path, n_arrays=3):
    """The first ``n_arrays`` arrays of a spill file written by :func:`write_cell_file`."""
    out = []
    with open(path, "rb") as f:
        if f.read(len(CELL_MAGIC)) != CELL_MAGIC:
            raise ValueError(f"{path!r} is not a MatrixFactorization spill file (wrong magic "
                             "bytes); remove it from spill_dir and fit again.")
        for _ in range(n_arrays):
            head = f.read(_CELL_HEADER.size)
            if len(head) != _CELL_HEADER.size:
                raise ValueError(f"spill file {path!r} is truncated; remove it and fit again.")
            code, n = _CELL_HEADER.unpack(head)
            dtype = np.dtype(code.rstrip(b"\0 ").decode("ascii"))
            a = np.fromfile(f, dtype=dtype, count=n)
            if len(a) != n:
                raise ValueError(f"spill file {path!r} is truncated; remove it and fit again.")
            out.append(a)
    return tuple(out)


def cell_data(cell, n_arrays=3):
    """A cell's (u, i, r): the persisted arrays themselves, or read from the cell's spill file
    (its first ``n_arrays`` only)."""
    if isinstance(cell, str):
        return read_cell_file(cell, n_arrays)
    return cell[:n_arrays]


def predict_dense(u, i, P, Q, bu, bi, mu):
    """μ + b_u + b_i + p_u·q_i with unknown (−1) users/items contributing nothing (cold start)."""
    out = np.full(len(u), mu, dtype=np.float64)
    ku, ki = u >= 0, i >= 0
    if ku.all() and ki.all():
        # Every id known (always so for training cells): the same sums without masked copies.
        out += bu[u]
        out += bi[i]
        out += np.einsum("ij,ij->i", P[u], Q[i])
        return out
    out[ku] += bu[u[ku]]
    out[ki] += bi[i[ki]]
    both = ku & ki
    out[both] += np.einsum("ij,ij->i", P[u[both]], Q[i[both]])
    return out


def sq_val(v, P, Q, bu, bi, mu):
    """Squared error and count of held-out (u, i, r) rows (dense indices, −1 for unknown)."""
    u, i, r = v
    e = r - predict_dense(u, i, P, Q, bu, bi, mu)
    return float(e @ e), len(r)


def _sq_error(cell, P, Q, bu, bi, mu):
    u, i, r = cell_data(cell)
    return float(_kernels.sq_error_cell(u, i, r, P, Q, bu, bi, mu, 0, 0))


def block_penalty(w, F, b) -> float:
    """One block's share of the penalty sum: Σ_rows w (‖f‖² + b²)."""
    return float(w @ ((F * F).sum(axis=1) + b * b))


def objective(sse, penalties, reg: float, n: int) -> float:
    """(Σ e² + λ Σ penalty) / n from per-cell squared errors and per-block penalty shares.

    Both sums are exact (``math.fsum``), so the value does not depend on the order in which
    cells and blocks were evaluated, on a worker or on the client.
    """
    return (math.fsum(sse) + reg * math.fsum(penalties)) / n


# ---------------------------------------------------------------- task functions
def _solve(A, rhs):
    try:
        return np.linalg.solve(A, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        # λ = 0 and fewer ratings than unknowns: the minimum-norm least-squares solution.
        return np.stack([np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(A, rhs)])


def _als_design(Z, use_bias):
    """The other side's rows z (with a trailing 1 for the bias), as the Gram kernel reads them."""
    return np.ascontiguousarray(np.hstack([Z, np.ones((Z.shape[0], 1))]) if use_bias else Z)


def _als_accumulate(acc, rows, cols, r, Zb, other_bias, mu, use_bias):
    """Adds these ratings to the Gram sums ``acc`` = (A, rhs, cnt) (see ``als_gram_add``)."""
    target = r - mu - other_bias[cols] if use_bias else r - mu
    _kernels.als_gram_add(rows, cols, target, Zb, *acc)
    return acc


def _als_empty(n_rows, Zb):
    k1 = Zb.shape[1]
    return np.zeros((n_rows, k1, k1)), np.zeros((n_rows, k1)), np.zeros(n_rows)


def _als_solve(acc, reg, use_bias, weighted):
    A, rhs, cnt = acc
    n_rows, k1 = rhs.shape
    lam = reg * cnt if weighted else np.full(n_rows, float(reg))
    A = A + lam[:, None, None] * np.eye(k1)
    x = np.zeros((n_rows, k1))
    has = cnt > 0
    if has.any():
        x[has] = _solve(A[has], rhs[has])
    if use_bias:
        return x[:, :-1].copy(), x[:, -1].copy()
    return x, np.zeros(n_rows)


def als_half_step(rows, cols, r, Z, other_bias, n_rows, mu, reg, use_bias, weighted=True):
    """One side's ALS solves for rows ``0..n_rows-1`` (local indices) given the other side.

    Returns (factors, biases). Public for the tests: each row solves
    ``(Σ z zᵀ + λ n I) x = Σ t z`` (``λ I`` when not ``weighted``; see the module docstring).
    """
    Zb = _als_design(Z, use_bias)
    acc = _als_accumulate(_als_empty(n_rows, Zb), rows, cols, r, Zb, other_bias, mu, use_bias)
    return _als_solve(acc, reg, use_bias, weighted)


def _als_half_task(cells, Z, other_bias, lo, hi, mu, reg, use_bias, weighted, users):
    """Solve rows ``lo..hi`` of the users' (``users``) or the items' side from their cells."""
    Zb = _als_design(Z, use_bias)
    acc = _als_empty(hi - lo, Zb)
    for cell in cells:
        u, i, r = cell_data(cell)
        rows, cols = (u, i) if users else (i, u)
        _als_accumulate(acc, rows - lo, cols, r, Zb, other_bias, mu, use_bias)
    return _als_solve(acc, reg, use_bias, weighted)


# ---------------------------------------------------------------- the solvers
class _CellSolver:
    """What both solvers share: the cells, the block bounds, the evaluation of an epoch.

    Parameters
    ----------
    cells : list
        The B² cells in (user block, item block) row-major order: persisted (u, i, r) arrays
        (futures) or cell file paths.
    val : list or None
        Held-out (u, i, r) parts as dense indices (delayed), for ``validation_rmse``.
    ub, ib : ndarray
        Bounds of the B user and item blocks (B + 1 dense indices each).
    n_u, n_i : ndarray
        Ratings per user and per item (the weights of the penalty).
    n, mu, seed, reg, use_bias
        Number of ratings, global mean, the fit's seed, λ, whether biases are learned.
    """

    def __init__(self, cells, val, *, ub, ib, n_u, n_i, n, mu, seed, reg, use_bias):
        self.cells, self.val = cells, val
        self.ub, self.ib, self.B = ub, ib, len(ub) - 1
        self.n_u, self.n_i = n_u, n_i
        self.n, self.mu, self.seed = n, mu, seed
        self.reg, self.use_bias = float(reg), bool(use_bias)

    def _penalty_weights(self):
        return self.n_u, self.n_i

    def _finish(self, st, P, Q, bu, bi):
        """Compute the new factors with their train and validation errors in one graph, store
        them in ``st`` and return (objective, history fields)."""
        mu = self.mu
        sq = [dask.delayed(_sq_error, pure=True)(c, P, Q, bu, bi, mu) for c in self.cells]
        vs = None
        if self.val is not None:
            vs = [dask.delayed(sq_val, pure=True)(v, P, Q, bu, bi, mu) for v in self.val]
        P, Q, bu, bi, sq, vs = dask.compute(P, Q, bu, bi, sq, vs)
        st.arrays = {"P": P, "Q": Q, "bu": bu, "bi": bi}
        wu, wi = self._penalty_weights()
        ub, ib = self.ub, self.ib
        pen = [block_penalty(w[lo:hi], F[lo:hi], b[lo:hi])
               for w, F, b, bounds in ((wu, P, bu, ub), (wi, Q, bi, ib))
               for lo, hi in zip(bounds[:-1], bounds[1:])]
        return objective(sq, pen, self.reg, self.n), self._info(sq, vs)

    def _info(self, sse, vs):
        """The history fields of an epoch: train and validation RMSE."""
        info = {"train_rmse": math.sqrt(math.fsum(sse) / self.n)}
        if vs is not None:
            m = sum(v[1] for v in vs)
            info["validation_rmse"] = math.sqrt(math.fsum(v[0] for v in vs) / max(m, 1))
        return info


#: Keys of the bold driver's state in ``TrainState.extra`` (checkpointed with it).
_GAIN, _PREVIOUS = "mf_step_gain", "mf_previous_objective"


def bold_driver_step(learning_rate, lr_decay, driver: dict, epoch: int, lr_scale=1.0) -> float:
    """The step of ``epoch`` (0-based): ``η₀ · gain / (1 + lr_decay · epoch)``."""
    return learning_rate * driver.get(_GAIN, 1.0) / (1.0 + lr_decay * epoch) * lr_scale


def bold_driver_adapt(driver: dict, objective_value: float, enabled: bool) -> dict:
    """The driver state after an epoch with this objective: the gain × 1.05 when the objective
    fell below the previous epoch's, × 0.5 when not (unless ``enabled`` is false)."""
    driver = dict(driver)
    prev = driver.get(_PREVIOUS)
    if enabled and prev is not None:
        driver[_GAIN] = driver.get(_GAIN, 1.0) * (
            BOLD_GROW if objective_value < prev else BOLD_SHRINK)
    driver[_PREVIOUS] = float(objective_value)
    return driver


# ---------------------------------------------------------------- chained DSGD epochs
#: DSGD epochs submitted as one graph, at most (see :class:`DSGDSolver`).
EPOCHS_PER_SUBMIT = 32
#: ... and at most about this many tasks per graph (an epoch is 4 B² + 1 tasks, more with
#: validation data), so that many blocks do not make one huge graph.
TASKS_PER_SUBMIT = 20_000


def _sgd_link(cell, user, item, driver, u0, i0, mu, reg, use_bias, seed, epoch, index):
    """One cell's SGD in a chained epoch. ``user`` = (P_b, b_u) and ``item`` = (Q_c, b_i) are
    the blocks as the previous task on them left them; ``driver["step"]`` is the epoch's step
    (from the previous epoch's evaluation, or the client's for the first epoch of a chain)."""
    # Copies: the inputs are results other tasks may still read (validation, evaluation).
    P, bu = user[0].copy(), user[1].copy()
    Q, bi = item[0].copy(), item[1].copy()
    u, i, r = cell_data(cell)
    order = block_rng(seed, "mf/order", epoch, index).permutation(len(r))
    _kernels.sgd_cell(u, i, r, order, P, Q, bu, bi, mu, driver["step"], reg, use_bias, u0, i0)
    return (P, bu), (Q, bi)


def _eval_link(cell, user, item, u0, i0, mu, weights):
    """A cell's Σ e² after the epoch; the diagonal cell (b, b), given ``weights`` = (w_u, w_i)
    of block b, adds the penalty shares of user block b and item block b."""
    (P, bu), (Q, bi) = user, item
    u, i, r = cell_data(cell)
    out = {"sse": float(_kernels.sq_error_cell(u, i, r, P, Q, bu, bi, mu, u0, i0)),
           "penalty": []}
    if weights is not None:
        out["penalty"] = [block_penalty(weights[0], P, bu), block_penalty(weights[1], Q, bi)]
    return out


def _decide_link(driver, settings, epoch, *evals):
    """The epoch's objective from its cells' evaluations, then the bold driver: the state and
    the step the next epoch's tasks read. The client replays the same two functions."""
    learning_rate, lr_decay, enabled, reg, n, lr_scale = settings
    sse = [e["sse"] for e in evals]
    pen = [p for e in evals for p in e["penalty"]]
    state = bold_driver_adapt(driver["state"], objective(sse, pen, reg, n), enabled)
    return {"state": state, "sse": sse, "penalty": pen,
            "step": bold_driver_step(learning_rate, lr_decay, state, epoch + 1, lr_scale)}


def _val_link(v, mu, n_blocks, *blocks):
    """Squared error and count of one held-out part (``blocks``: the B user then B item
    blocks after the epoch)."""
    users, items = blocks[:n_blocks], blocks[n_blocks:]
    P, bu = (np.concatenate([b[k] for b in users]) for k in (0, 1))
    Q, bi = (np.concatenate([b[k] for b in items]) for k in (0, 1))
    return sq_val(v, P, Q, bu, bi, mu)


def _collect_link(n_epochs, n_val, n_blocks, *refs):
    """Per epoch its decision and validation errors, and the factors after the last epoch."""
    decides, refs = refs[:n_epochs], refs[n_epochs:]
    vals = [list(refs[k * n_val:(k + 1) * n_val]) for k in range(n_epochs)]
    blocks = refs[n_epochs * n_val:]
    users, items = blocks[:n_blocks], blocks[n_blocks:]
    arrays = {name: np.concatenate([b[k] for b in side])
              for side, names in ((users, ("P", "bu")), (items, ("Q", "bi")))
              for k, name in enumerate(names)}
    return list(decides), vals, arrays


class DSGDSolver(_CellSolver):
    """Distributed SGD over the B × B cells with a bold-driver step size (module docstring).

    Epochs run in *chains*: up to :data:`EPOCHS_PER_SUBMIT` of them are submitted as one graph
    (:class:`~dml._graph.LinkedTasks`), in which a cell's task reads its user and item blocks
    from the tasks that last updated them, one evaluation task per cell computes its squared
    error after the epoch, and one decision task per epoch turns those into the objective and
    the bold driver's next step, which the next epoch's tasks read. An epoch thus costs
    B + 2 scheduler hops and no round trip through the client; the factors travel between
    workers block by block and reach the client once per chain. The client then *replays*
    the chain epoch by epoch (history, stopping rule, checkpoints) with the same functions
    and checks that each step the workers used is the one it computes.

    A chain ends where the client needs the factors: at a checkpoint, and after every epoch
    when callbacks or the ``tol`` stopping rule may end the fit there (``epochs_per_submit``
    1). The model does not depend on how epochs were chained.

    Parameters
    ----------
    learning_rate : float
        Initial step η₀.
    lr_decay : float
        Epoch e's step is divided by ``1 + lr_decay · e``.
    bold_driver : bool
        Adapt the step after every epoch: × 1.05 when the training objective fell, × 0.5 when it
        rose. The current factor and the last objective are kept in ``state.extra`` (so they
        are checkpointed).
    epochs_per_submit : int, default=EPOCHS_PER_SUBMIT
        Longest chain.
    max_iter : int, optional
        The fit's last epoch: no chain runs past it.
    checkpoint_every : int, optional
        Chains end at multiples of it (when the fit writes checkpoints).
    **common
        See :class:`_CellSolver`.
    """

    def __init__(self, cells, val, *, learning_rate, lr_decay, bold_driver,
                 epochs_per_submit=EPOCHS_PER_SUBMIT, max_iter=None, checkpoint_every=None,
                 **common):
        super().__init__(cells, val, **common)
        self.learning_rate = float(learning_rate)
        self.lr_decay = float(lr_decay)
        self.bold_driver = bool(bold_driver)
        self.epochs_per_submit = int(epochs_per_submit)
        self.max_iter = max_iter
        self.checkpoint_every = checkpoint_every
        self._replay: list = []

    @staticmethod
    def _driver(st) -> dict:
        return {k: st.extra[k] for k in (_GAIN, _PREVIOUS) if k in st.extra}

    def step_size(self, st) -> float:
        """The step of the epoch ``st`` is about to run."""
        return bold_driver_step(self.learning_rate, self.lr_decay, self._driver(st), st.epoch,
                                st.lr_scale)

    def adapt(self, st, objective: float) -> None:
        """Bold driver: update the step gain from this epoch's objective and the previous one."""
        st.extra.update(bold_driver_adapt(self._driver(st), objective, self.bold_driver))

    def chain_length(self, st) -> int:
        """Epochs the next chain runs from ``st``."""
        n = self.epochs_per_submit
        if self.max_iter is not None:
            n = min(n, self.max_iter - st.epoch)
        if self.checkpoint_every:
            n = min(n, self.checkpoint_every - st.epoch % self.checkpoint_every)
        n_val = 0 if self.val is None else len(self.val)
        n = min(n, TASKS_PER_SUBMIT // (4 * self.B ** 2 + 1 + n_val))
        return max(n, 1)

    def epoch(self, st) -> EpochResult:
        if not self._replay:
            self._replay = self._run_chain(st, self.chain_length(st))
        step, decide, vals, arrays = self._replay.pop(0)
        if step != self.step_size(st):
            raise RuntimeError("MatrixFactorization: the chained DSGD epochs used another step "
                               "than the client's replay computes; this is a bug in dml, "
                               "please report it")
        obj = objective(decide["sse"], decide["penalty"], self.reg, self.n)
        self.adapt(st, obj)
        if arrays is not None:
            st.arrays = arrays
        return EpochResult(objective=obj, learning_rate=step, info=self._info(decide["sse"], vals))

    def _run_chain(self, st, n_epochs):
        """``n_epochs`` epochs from ``st`` as one graph; per epoch (step, decision, validation
        errors, the factors after it for the last epoch and None before)."""
        A, B, ub, ib = st.arrays, self.B, self.ub, self.ib
        chain = LinkedTasks("dsgd-epoch")
        cells = [chain.arg(c) for c in self.cells]
        val = [] if self.val is None else [chain.arg(v) for v in self.val]
        # A block is one graph key (or embedded when small), fetched by the task that needs it.
        users = [chain.arg(broadcast((A["P"][lo:hi], A["bu"][lo:hi])))
                 for lo, hi in zip(ub[:-1], ub[1:])]
        items = [chain.arg(broadcast((A["Q"][lo:hi], A["bi"][lo:hi])))
                 for lo, hi in zip(ib[:-1], ib[1:])]
        wu, wi = self._penalty_weights()
        weights = [chain.arg(broadcast((wu[ub[b]:ub[b + 1]], wi[ib[b]:ib[b + 1]])))
                   for b in range(B)]
        settings = (self.learning_rate, self.lr_decay, self.bold_driver, self.reg, self.n,
                    st.lr_scale)
        driver = {"state": self._driver(st), "step": self.step_size(st)}
        decides, vals = [], []
        for k in range(n_epochs):
            epoch = st.epoch + k
            for s in block_rng(self.seed, "mf/strata", epoch).permutation(B):
                for b in range(B):
                    c = (b + int(s)) % B
                    x = b * B + c
                    out = chain.add(("sgd", epoch, x), _sgd_link, cells[x], users[b], items[c],
                                    driver, ub[b], ib[c], self.mu, self.reg, self.use_bias,
                                    self.seed, epoch, x)
                    users[b] = chain.add(("user", epoch, x), getitem, out, 0)
                    items[c] = chain.add(("item", epoch, x), getitem, out, 1)
            evals = [chain.add(("eval", epoch, b * B + c), _eval_link, cells[b * B + c],
                               users[b], items[c], ub[b], ib[c], self.mu,
                               weights[b] if b == c else None)
                     for b in range(B) for c in range(B)]
            driver = chain.add(("decide", epoch), _decide_link, driver, settings, epoch, *evals)
            decides.append(driver)
            vals.append([chain.add(("val", epoch, j), _val_link, v, self.mu, B, *users, *items)
                         for j, v in enumerate(val)])
        out = chain.add(("collect",), _collect_link, n_epochs, len(val), B, *decides,
                        *[v for row in vals for v in row], *users, *items)
        decided, val_sums, arrays = chain.compute(out)
        steps = [self.step_size(st)] + [d["step"] for d in decided[:-1]]
        return [(steps[k], decided[k], val_sums[k] if self.val is not None else None,
                 arrays if k == n_epochs - 1 else None) for k in range(n_epochs)]


class ALSSolver(_CellSolver):
    """Alternating least squares over the user blocks, then the item blocks (module docstring).

    Parameters
    ----------
    weighted : bool
        λ n_u / λ n_i (weighted-λ) instead of λ for every user and item.
    **common
        See :class:`_CellSolver`.
    """

    def __init__(self, cells, val, *, weighted, **common):
        super().__init__(cells, val, **common)
        self.weighted = bool(weighted)

    def _penalty_weights(self):
        if self.weighted:
            return self.n_u, self.n_i
        return np.ones(len(self.n_u)), np.ones(len(self.n_i))

    def epoch(self, st) -> EpochResult:
        A, B, ub, ib = st.arrays, self.B, self.ub, self.ib
        half = dask.delayed(_als_half_task, pure=True, nout=2)
        cat = dask.delayed(np.concatenate, pure=True)
        common = (self.mu, self.reg, self.use_bias, self.weighted)
        ures = [half(self.cells[b * B:(b + 1) * B], A["Q"], A["bi"], ub[b], ub[b + 1], *common,
                     True) for b in range(B)]
        P, bu = cat([r[0] for r in ures]), cat([r[1] for r in ures])
        ires = [half([self.cells[b * B + c] for b in range(B)], P, bu, ib[c], ib[c + 1], *common,
                     False) for c in range(B)]
        Q, bi = cat([r[0] for r in ires]), cat([r[1] for r in ires])
        obj, info = self._finish(st, P, Q, bu, bi)
        return EpochResult(objective=obj, info=info)
