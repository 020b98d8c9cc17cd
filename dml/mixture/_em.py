"""The EM iterations of a GaussianMixture fit: on the client, or chained on the cluster.

An EM iteration is one pass over the blocks: each block computes, for every run, the
responsibility sums, weighted sums, scatter and log-likelihood of its rows
(:func:`~dml.mixture._gmm_kernels.em_block`); the statistics are merged in the fixed tree order
of :func:`dml._blocks.tree_reduce`; the M-step turns them into the next parameters.
:class:`EMDriver` holds the runs and makes the M-step. The client's loop and the chained tasks
call the same driver code on the same numbers, so both arrive at the same model bit for bit.

On blocks held in worker memory the iterations are chained (:func:`run_chained`, built on
:func:`dml._block_groups.chain_steps`): up to :data:`ITERS_PER_SUBMIT` iterations form one
graph, one task per group of blocks and iteration, which takes every group's partial sums of
the previous iteration (its pieces of the fixed tree), completes the tree, makes the M-step
(every group the same) and runs the E-step of its own blocks. An iteration then costs a
scheduler hop instead of a round trip through the client (graph, submission, gathering: about
as much as the arithmetic of a small fit). Blocks read from storage at every pass iterate one
pass per submission (:func:`run_per_pass`), since a chain would let the scheduler load later
iterations' blocks early. See docs/mixture.md, "How a fit runs".
"""
from __future__ import annotations

import copy
from functools import partial

import numpy as np

from dml._block_groups import FANIN, chain_steps, finish_tree, range_reduce
from dml._blocks import Blocks, compute
from dml.mixture import _gmm_kernels as K

__all__ = ["ITERS_PER_SUBMIT", "EMDriver", "Run", "run_chained", "run_per_pass"]

#: EM iterations submitted as one graph. The links after every run converged are no-op tasks,
#: so a long chain wastes little when the runs stop early.
ITERS_PER_SUBMIT = 32


class Run:
    """One EM run: its parameters and bookkeeping."""

    def __init__(self, weights, means, covariances, prec_chol, lower_bound=-np.inf):
        self.weights, self.means = weights, means
        self.covariances, self.prec_chol = covariances, prec_chol
        self.lower_bound = lower_bound
        self.history: list[float] = []
        self.n_iter = 0
        self.converged = False
        self.done = False


class EMDriver:
    """The runs of one fit and the M-step that advances them (the runs share every pass).

    ``changes`` collects ``(iteration, lower bound change)`` of every run each iteration, for
    the ``verbose`` messages the client prints.
    """

    def __init__(self, runs: list[Run], covariance_type: str, reg_covar: float, tol: float,
                 n: int, max_iter: int):
        self.runs = runs
        self.covariance_type, self.reg_covar, self.tol = covariance_type, reg_covar, tol
        self.n, self.max_iter = n, max_iter
        self.iteration = 0
        self.changes: list[tuple[int, float]] = []

    @property
    def done(self) -> bool:
        return self.iteration >= self.max_iter or all(r.done for r in self.runs)

    def params(self) -> list[tuple]:
        """What the E-step needs of every active run."""
        return [(r.weights, r.means, r.prec_chol) for r in self.runs if not r.done]

    def update(self, stats: list) -> None:
        """The M-step of every active run from its merged statistics, and the stopping rule."""
        self.iteration += 1
        ct = self.covariance_type
        for r, s in zip([r for r in self.runs if not r.done], stats):
            previous = r.lower_bound
            nk, r.means, r.covariances = K.m_step(s, self.reg_covar, ct)
            r.weights = nk / nk.sum()
            r.prec_chol = K.precision_cholesky(r.covariances, ct)
            r.lower_bound = s["loglik"] / self.n
            r.history.append(r.lower_bound)
            r.n_iter = self.iteration
            change = r.lower_bound - previous
            self.changes.append((self.iteration, change))
            if abs(change) < self.tol:
                r.converged = r.done = True

    def advanced(self, stats: list) -> EMDriver:
        """A copy after :meth:`update` (tasks never change their inputs: on an in-process
        cluster the groups' tasks share one driver object)."""
        out = copy.deepcopy(self)
        out.update(stats)
        return out


def run_per_pass(blocks: Blocks, driver: EMDriver, report) -> EMDriver:
    """The iterations one pass (one graph submission) each; ``report(driver)`` after each."""
    while not driver.done:
        driver.update(blocks.map_reduce(K.em_block, driver.params(), driver.covariance_type,
                                        combine=K.combine_stats))
        report(driver)
    return driver


def run_chained(blocks: Blocks, driver: EMDriver, report) -> EMDriver:
    """The iterations on held ``blocks`` in chains of up to :data:`ITERS_PER_SUBMIT` per graph
    submission; ``report(driver)`` after each chain."""
    n_blocks = len(blocks.parts)
    if blocks.groups is not None:
        fixed = list(blocks.groups.objects)
        bounds = blocks.groups.bounds
        group_args = [(bounds[g], n_blocks, False) for g in range(len(fixed))]
    else:  # too few blocks to group: each one a group of its own
        fixed = list(blocks.parts)
        group_args = [(i, n_blocks, True) for i in range(n_blocks)]
    while not driver.done:
        n_steps = min(ITERS_PER_SUBMIT, driver.max_iter - driver.iteration)
        # ``carried``: nothing changes on the blocks, the held groups themselves are passed.
        _, out = chain_steps(fixed, fixed, driver, _group_step, group_args, n_steps,
                             partial(_finish, n_blocks), "gmm-em")
        (driver,) = compute(out)
        report(driver)
    return driver


def _merged(driver: EMDriver, partials, n_blocks: int) -> EMDriver:
    if not partials or partials[0] is None:  # first step, or the runs were already done
        return driver
    return driver.advanced(finish_tree(partials, n_blocks, K.combine_stats, FANIN))


def _group_step(group, carried, driver, args, *partials):
    """One group's chained iteration: the M-step from every group's previous statistics (none
    at the first step), then the E-step of this group's blocks, as its pieces of the tree."""
    start, n_blocks, single = args
    driver = _merged(driver, partials, n_blocks)
    if driver.done:
        return carried, driver, None
    blocks = (group,) if single else group
    ct = driver.covariance_type
    params = driver.params()
    stats = [K.em_block(p[0], p[1], p[2], params, ct) for p in blocks]
    return carried, driver, range_reduce(stats, start, n_blocks, K.combine_stats, FANIN)


def _finish(n_blocks, driver, *partials):
    """The driver after the last iteration's M-step (the client continues from it)."""
    return _merged(driver, partials, n_blocks)
