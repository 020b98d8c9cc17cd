"""What an epoch's hand-over to a collective run costs: a run submitted for every step (how SGD
epochs ran before) against one run that stays up and is handed every step
(:class:`dml._collective.LiveRun`, how they run now).

The tasks do no arithmetic: every step is one exchange of a small value between 4 groups on a
2-worker ``LocalCluster`` (one thread each), so the times are the mechanism's own cost per
epoch: submitting the run, its tasks starting and making their links, and returning the result
(before), or one call through the scheduler to the workers (now). The two are measured
alternately, ``--steps`` times each, and the medians printed.

Usage (repository root)::

    python -m benchmarks.live_run_steps [--steps 40]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

from dml import _collective

GROUPS = 4


def _run_per_step(g, run, addresses, value):
    with _collective.long_lived(run, g, addresses, "live_run_steps") as link:
        out = link.exchange(0, value)
        return out if g == 0 else None


def _live(g, run, addresses):
    with _collective.long_lived(run, g, addresses, "live_run_steps") as link:
        step = 0
        while (value := link.receive(step, 60.0)) is not None:
            out = link.exchange(step, value)
            if g == 0:
                _collective.post(run, step, out)
            step += 1


def _submit(client, fn, run, addresses, *args):
    return [client.submit(fn, g, run, addresses, *args, key=f"{run}-{g}",
                          workers=[addresses[g]], allow_other_workers=False, pure=False)
            for g in range(GROUPS)]


def measure(steps: int = 40) -> dict:
    """Median seconds per step of both ways, and the machine's load average."""
    import dml.runtime

    client = dml.runtime.connect(n_workers=2, threads_per_worker=1)
    try:
        workers = sorted(client.run(_collective.install))
        addresses = [workers[g % len(workers)] for g in range(GROUPS)]
        tag = uuid.uuid4().hex
        run = f"live-{tag}"
        live = _collective.LiveRun(client, _submit(client, _live, run, addresses), run,
                                   addresses)
        live.step(0)  # the tasks start and make their links once
        before, now = [], []
        for k in range(steps):
            t0 = time.perf_counter()
            run_k = f"per-step-{tag}-{k}"
            _collective.execute(client, _submit(client, _run_per_step, run_k, addresses, k),
                                run_k, addresses, tidy_finished=False)
            before.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            live.step(k)
            now.append(time.perf_counter() - t0)
        live.close()
        return {"run_per_step": statistics.median(before),
                "live_run_step": statistics.median(now), "load": os.getloadavg()[0]}
    finally:
        client.close()
        client.cluster.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    out = measure(p.parse_args(argv).steps)
    print(f"load average {out['load']:.1f}: a run per step {out['run_per_step'] * 1e3:.1f} ms, "
          f"a step of a live run {out['live_run_step'] * 1e3:.1f} ms (medians)")


if __name__ == "__main__":
    main()
