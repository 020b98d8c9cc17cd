"""How many blocks of an SGD epoch can train at once: the parallel width and the critical path.

These machines have 2 cores, so the width of partition-parallel SGD on a large cluster cannot be
measured here; it follows from the epoch's plan, which dml computes from the block lengths and
the configuration alone (``dml.optim.streams``, the same code a fit runs). For every model with
its default hyper-parameters and a range of data sizes and partition counts, this prints

* **streams**: models trained side by side in every round — the tasks of a round when each has a
  worker thread, i.e. how many blocks train at once (a stream walks its consecutive blocks in
  order);
* **rounds / epoch** and **critical path**: the mini-batch steps one stream takes one after the
  other in an epoch (the sum over rounds of the longest stream's steps): an epoch cannot finish
  faster than that many steps plus one combination per round, whatever the cluster;
* **speed-up bound**: all steps of the epoch divided by the critical path — what unlimited
  workers could give, before communication;
* **busy threads of 256**: the round's tasks on a 256-worker, one-thread-each cluster (dml groups
  streams into about two tasks per thread, so this is ``min(streams, 256)``).

Summed rounds are limited (dml.optim.summed_rounds): ``SGDRegressor``'s by the data's curvature
(the table assumes standardised, uncorrelated features: curvature 1, as in the
``sgd_partitions`` benchmark), the MLP's (Adam) to 32 steps in all. The first epoch is shown,
where a decaying step size makes the limit bind most, and the critical path of a later epoch
(averaged rounds: the first epoch's rounds grow with the schedule's memory,
dml.optim.averaged_rounds; later epochs are four equal shares).

Usage (repository root, dev venv)::

    python -m benchmarks.sgd_width [--output FILE]
"""
from __future__ import annotations

import argparse
import sys

SIZES = ((240_000, 1), (240_000, 64), (240_000, 1_024), (10_000_000, 1_024),
         (100_000_000, 1_024), (100_000_000, 10_000), (1_000_000_000, 10_000))
THREADS = 256


def _configs():
    from dml.linear_model import SGDClassifier, SGDRegressor
    from dml.linear_model._problem import LinearProblem
    from dml.neural_network import MLPClassifier
    from dml.neural_network._problem import MLPProblem
    from dml.optim.losses import get_loss
    from dml.optim.summed_rounds import RoundLimit, optimizer_traits

    out = []
    for name, est, loss in (("SGDClassifier(log_loss)", SGDClassifier(loss="log_loss"),
                             "log_loss"),
                            ("SGDClassifier(hinge)", SGDClassifier(), "hinge"),
                            ("SGDRegressor", SGDRegressor(), "squared_error")):
        problem = LinearProblem(50, get_loss(loss))
        config = est._sgd_config(problem, problem.loss)
        # Standardised, uncorrelated features: the data's curvature is 1.
        kappa = problem.loss.summed_curvature
        limit = RoundLimit(kappa, **optimizer_traits(config)) if kappa else None
        out.append((name, problem, config, limit))
    mlp = MLPClassifier((64,))
    problem = MLPProblem((50, 64, 1), "relu", "logistic")
    config = mlp._sgd_config(problem, 10 ** 9)
    out.append(("MLPClassifier((64,))", problem, config,
                RoundLimit(None, **optimizer_traits(config))))
    return out


def plan_row(problem, config, limit, rows, blocks):
    """Streams, rounds, critical path and total steps of the first epoch, and the critical path
    of the second."""
    import numpy as np

    from dml.optim.averaged_rounds import epoch_rounds, round_bound
    from dml.optim.engine import round_cost_params
    from dml.optim.streams import make_streams, round_plans

    lengths = np.full(blocks, rows // blocks, dtype=np.int64)
    lengths[: rows % blocks] += 1
    layout = make_streams(lengths, config.batch_size, config.stream_steps)
    target = config.steps_per_round(layout, round_cost_params(problem))
    # The fit's own plan of each epoch (dml.optim.engine.make_epoch_fn).
    bound = round_bound(config, config.combine_mode, limit)
    first = epoch_rounds(target, layout, bound, config.schedule, 0)
    rounds = round_plans(layout, first)
    critical = sum(max(r.taken) for r in rounds)
    total = sum(r.total_steps for r in rounds)
    second = epoch_rounds(target, layout, bound, config.schedule, total)
    if second == first:  # (planning thousands of rounds over 10,000 streams takes seconds)
        return layout.n_streams, len(rounds), critical, total, critical
    later = sum(max(r.taken) for r in round_plans(layout, second))
    return layout.n_streams, len(rounds), critical, total, later


def table() -> str:
    lines = ["| model | rows | blocks | streams (blocks at once) | rounds / epoch | critical path "
             "(steps) | all steps | speed-up bound | busy threads of 256 | critical path, later "
             "epochs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, problem, config, limit in _configs():
        for rows, blocks in SIZES:
            W, R, critical, total, later = plan_row(problem, config, limit, rows, blocks)
            lines.append(f"| {name} | {rows:,} | {blocks:,} | {W:,} | {R:,} | {critical:,} | "
                         f"{total:,} | {total / critical:,.0f}× | {min(W, THREADS)} | "
                         f"{later:,} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", help="also write the table to this file")
    args = ap.parse_args(argv)
    from benchmarks.report import emit

    emit(table(), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
