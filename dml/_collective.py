"""Runs of many rounds as one long-lived task per group of blocks, exchanging partials directly.

A training loop whose rounds are chained Dask graphs pays the scheduler for every round: a
task per group, and every group's result moved to every task of the next round (tens of
milliseconds a round). When the rounds' arithmetic is smaller than that, the fit is paid in
scheduling. Here, on a ``distributed`` cluster, a *run* of many rounds is one task per group,
pinned to a worker. The tasks leave the worker's thread pool (``secede``), so all of a run's
tasks run at once whatever the number of threads. Each round, a group computes its partial
result, sends it to the groups on other workers, waits for the other groups' partials and gets
them all in group order; the caller sums them in its fixed reduction order, so the result does
not depend on how groups are spread over workers. On a ``tcp://`` cluster the partials go over
a direct channel between the run's tasks (:mod:`dml._direct`: sockets the task threads read and
write themselves, set up once per run); otherwise (inproc or TLS comms, a socket that cannot be
opened) as one message per worker through a handler this module adds to the worker, so the
worker's own connections carry them. LightGBM's and XGBoost's Dask interfaces work the same way
with sockets of their own.

The client only submits a run and waits for it (:func:`execute`), or, for a run that takes
several steps from the client (SGD's epochs), hands it each step's input and waits for group
0's result of it (:class:`LiveRun`). A lost worker or an
unreachable peer ends the run: the client tells the workers to abandon it, cancels its tasks
and submits it again from its first round, whose state the client knows, so the result is the
same. A run whose tasks cannot all start (paused or busy workers) raises
:class:`RunCannotStart`, and the caller falls back to its chained graphs.

Used by gradient boosting (:mod:`dml.ensemble._gb_collective`) and mini-batch SGD
(:mod:`dml.optim.collective_rounds`); docs/gradient_boosting.md ("On a cluster") and
docs/partition_parallel_sgd.md ("What a round costs") describe what each exchanges.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time

# ---------------------------------------------------------------------------- worker side
#: Messages, abandoned runs and callers' state between runs, per worker process.
_COND = threading.Condition()
_BOX: dict = {}          # (run, step, sender, recipient) -> the sender's partial
#: Runs abandoned or finished, oldest first: late messages for them are dropped. Only the
#: newest :data:`_DEAD_KEEP` are remembered (one entry per run would otherwise pile up in a
#: long-lived worker); a message arrives within seconds of its run's end, far fewer runs ago.
_DEAD_RUNS: dict = {}
_DEAD_KEEP = 4096
#: Callers' state between runs: (fit, group) -> whatever the caller keeps (dropped with the fit).
STATE: dict = {}
HANDLER = "dml_collective_partial"
#: The sender number of the client's inputs to a live run (:class:`LiveRun`).
CLIENT = -1
#: A live run's results for the client: (run, step) -> the result group 0 posted before the
#: client's call came for it, or (run, step) -> (event loop, asyncio future) of that call.
_RESULTS: dict = {}
_WAITERS: dict = {}
#: Seconds between checks, while waiting for a message, that the run was not abandoned.
POLL = 0.5


class RunLost(RuntimeError):
    """The run cannot go on (a peer is gone, the run was abandoned, the state is missing);
    the client submits it again."""


class RunCannotStart(RuntimeError):
    """Some tasks of a run did not start: the caller falls back to its chained graphs."""


def _deliver(run, step, sender, recipients, data):
    with _COND:
        if run not in _DEAD_RUNS:
            for h in recipients:
                _BOX[(run, step, sender, h)] = data
            _COND.notify_all()


async def _receive(comm=None, run=None, step=None, sender=None, recipients=None, data=None):
    _deliver(run, step, sender, recipients, data)


def install(dask_worker):
    """Add the message handler to a worker (run with ``Client.run`` before a run: messages
    are sent without a reply, so one reaching a worker without the handler would be lost)."""
    dask_worker.handlers.setdefault(HANDLER, _receive)


def _mark_dead(run):
    _DEAD_RUNS.pop(run, None)
    _DEAD_RUNS[run] = None
    while len(_DEAD_RUNS) > _DEAD_KEEP:
        del _DEAD_RUNS[next(iter(_DEAD_RUNS))]


def abandon(run, fit=None):
    """Stop a run on this worker (run with ``Client.run``): its waiting tasks raise
    :class:`RunLost`; with ``fit``, also drop the fit's state (the fit is over)."""
    with _COND:
        _mark_dead(run)
        for k in [k for k in _BOX if k[0] == run]:
            del _BOX[k]
        for k in [k for k in _RESULTS if k[0] == run]:
            del _RESULTS[k]
        for k in [k for k in _WAITERS if k[0] == run]:
            loop, fut = _WAITERS.pop(k)
            loop.call_soon_threadsafe(_settle, fut, None)
        if fit is not None:
            for k in [k for k in STATE if k[0] == fit]:
                del STATE[k]
        _COND.notify_all()


def leftovers(fit):
    """Entries a fit left in this worker's memory (for tests: none after a fit)."""
    with _COND:
        return (sum(1 for k in STATE if k[0] == fit)
                + sum(1 for d in (_BOX, _RESULTS, _WAITERS) for k in d
                      if str(k[0]).startswith(fit)))


def channels():
    """How many groups of runs spanning several workers used a direct channel here, and how
    many the handler transport: ``{"direct": n, "handler": m}``."""
    with _COND:
        return dict(_CHANNELS)


def dead_runs():
    """How many finished runs this worker remembers (bounded by :data:`_DEAD_KEEP`)."""
    with _COND:
        return len(_DEAD_RUNS)


def _settle(fut, value):
    if not fut.done():
        fut.set_result(value)


def post(run, step, value):
    """Inside group 0's task of a live run: ``value`` is the result of the client's ``step``
    (:meth:`LiveRun.step` returns it)."""
    with _COND:
        if run in _DEAD_RUNS:
            return
        waiter = _WAITERS.pop((run, step), None)
        if waiter is None:
            _RESULTS[(run, step)] = value
    if waiter is not None:
        loop, fut = waiter
        loop.call_soon_threadsafe(_settle, fut, ("done", value))


async def _step_call(run, step, value, groups_at, first, dask_worker=None):
    """On every worker of a live run (``Client.run``): ``value`` to the groups here as their
    input of ``step``; on group 0's worker (``first``), also wait for the step's result.
    Returns ``("done", result)``, None when the run ended, or nothing elsewhere."""
    import asyncio

    install(dask_worker)
    mine = dask_worker.address
    _deliver(run, ("input", step), CLIENT, groups_at.get(mine, ()), value)
    if mine != first:
        return None
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    with _COND:
        if run in _DEAD_RUNS:
            return None
        if (run, step) in _RESULTS:
            return ("done", _RESULTS.pop((run, step)))
        _WAITERS[(run, step)] = (loop, fut)
    try:
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(fut), POLL)
            except asyncio.TimeoutError:
                with _COND:
                    if run in _DEAD_RUNS:
                        return None
    finally:
        with _COND:
            _WAITERS.pop((run, step), None)


#: Whether runs spanning several workers of a ``tcp://`` cluster swap partials over a direct
#: channel (:mod:`dml._direct`) rather than through the workers' event loops.
DIRECT = True
_CARD, _OK = ("direct", "card"), ("direct", "ok")
#: Groups of runs spanning several workers that swapped partials over a direct channel or
#: through the handler, in this process (for tests and diagnostics).
_CHANNELS = {"direct": 0, "handler": 0}


def _steps_on_channel(step):
    """Whether a step's partials go over the direct channel (whose frames number steps with
    64-bit integers); others go through the handler transport."""
    return type(step) is int and -(1 << 63) <= step < (1 << 63)


class Link:
    """A group's end of a run: sends its partial of a step to the other groups and gathers
    theirs. ``addresses[h]`` is the worker of group ``h``. Groups on the same worker swap
    partials in memory; groups on other workers over a direct channel once :meth:`open` made
    one, else through the workers' connections (the handler transport)."""

    def __init__(self, worker, key, run, g, addresses, what):
        self.worker, self.key, self.run, self.g, self.what = worker, key, run, g, what
        self.n_groups = len(addresses)
        self.addresses = list(addresses)
        self.groups_at: dict = {}
        for h, a in enumerate(addresses):
            self.groups_at.setdefault(a, []).append(h)
        self.channel = None

    def exchange(self, step, partial):
        """Every group's partial of ``step`` (this group's is ``partial``), in group order."""
        if self.n_groups == 1:
            # No one to swap with (a fit of one group): the partial is the whole tree's, and
            # the only news there could be is that the run was abandoned.
            if self.run in _DEAD_RUNS:
                raise RunLost(f"{self.what}: run {self.run} was abandoned")
            return [partial]
        self.send(step, partial)
        return self.gather(step, partial)

    def exchange_each(self, step, parts):
        """A reduce-scatter's exchange: ``parts[h]`` is this group's partial of ``step`` for
        group ``h`` (each group receives only its share, e.g. its features' histograms).
        Returns every group's partial for this group, in group order."""
        if self.n_groups == 1:
            return self.exchange(step, parts[0])
        for h in range(self.n_groups):
            if h != self.g:
                self.send(step, parts[h], to=h)
        return self.gather(step, parts[self.g])

    def receive(self, step, idle):
        """The client's input for ``step`` of a live run (:meth:`LiveRun.step`), or None when
        none came within ``idle`` seconds (the client is gone or forgot to end the run) or the
        client ended the run (:meth:`LiveRun.close`)."""
        key = (self.run, ("input", step), CLIENT, self.g)
        deadline = time.monotonic() + idle
        with _COND:
            while True:
                if self.run in _DEAD_RUNS:
                    return None
                if key in _BOX:
                    return _BOX.pop(key)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if not _COND.wait(timeout=min(POLL, left)):
                    self._check()

    # ---- the direct channel
    def open(self):
        """Make the direct channel when the run spans several workers of a ``tcp://`` cluster:
        every group opens a listening socket, the groups swap its address and token through
        the handler transport, connect to each other's and say whether all went well. All
        groups see the same answers, so either all use the channel or none does."""
        from dml import _direct

        mine, g = self.worker.address, self.g
        remote = [h for h, a in enumerate(self.addresses) if a != mine]
        if not remote:
            return
        if not DIRECT or not all(str(a).startswith("tcp://") for a in self.addresses):
            self._count("handler")
            return
        try:
            listener = _direct.Listener(mine)
        except OSError:
            listener = None
        out, inc = {}, None
        try:
            cards = self._handler_exchange(_CARD, None if listener is None else listener.card())
            if all(c is not None for c in cards):
                try:
                    host = _direct._host(mine)
                    for h in remote:
                        out[h] = _direct.connect(cards[h], g, host=host)
                    inc = _direct.accept(listener, set(remote), self._peer_failed)
                except OSError:
                    inc = None
            ok = self._handler_exchange(_OK, inc is not None)
            if all(ok):
                self.channel, out, inc = _direct.Channel(out, inc), {}, None
            self._count("direct" if self.channel is not None else "handler")
        finally:
            if listener is not None:
                listener.close()
            for s in list(out.values()) + list((inc or {}).values()):
                s.close()

    @staticmethod
    def _count(transport):
        with _COND:
            _CHANNELS[transport] += 1

    def _peer_failed(self):
        """While connecting: whether a group said it failed (or the run was abandoned)."""
        with _COND:
            return self.run in _DEAD_RUNS or any(
                _BOX.get((self.run, _OK, h, self.g)) is False for h in range(self.n_groups))

    def _handler_exchange(self, step, value):
        self._deliver_local(step, value)
        self._send_remote(step, value)
        return self._gather_box(step, {self.g: value})

    def close(self):
        """Close the direct channel (the run is over on this group)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    # ---- sending and gathering
    def send(self, step, partial, to=None):
        """The group's partial to every other group (or only to group ``to``): in memory for
        groups on this worker, over the direct channel or one message per other worker for
        the others."""
        self._deliver_local(step, partial, to)
        if to is not None and self.addresses[to] == self.worker.address:
            return
        if self.channel is None or not _steps_on_channel(step):
            self._send_remote(step, partial, to)
            return
        from dml import _direct

        try:
            bufs = _direct.frame(step, self.g, partial)
        except TypeError:  # a value the channel does not carry: the handler transport does
            bufs = _direct.marker(step, self.g)
            self._send_remote(step, partial, to)
        try:
            self.channel.post(bufs, to)
        except _direct.PeerGone as exc:
            self._lost(exc)

    def _deliver_local(self, step, partial, to=None):
        """The partial, in memory, to the other groups on this worker (or only to ``to``)."""
        local = [h for h in self.groups_at.get(self.worker.address, ())
                 if h != self.g and to in (None, h)]
        if local:
            _deliver(self.run, step, self.g, local, partial)

    def _send_remote(self, step, partial, to=None):
        """The partial to the groups on other workers (or only to group ``to``): one message
        per worker, through the handler transport."""
        worker, run, g = self.worker, self.run, self.g
        groups_at = self.groups_at if to is None else {self.addresses[to]: [to]}
        mine = worker.address

        async def send_all():
            import asyncio

            from distributed.protocol import to_serialize

            async def one(addr, groups):
                # No reply: the sender does not wait for the receiver's loop; a lost peer
                # shows as a failed write here, or as a lost worker to the client.
                await worker.rpc(addr).dml_collective_partial(
                    run=run, step=step, sender=g, recipients=groups,
                    data=to_serialize(partial), reply=False)

            calls = [one(a, gs) for a, gs in groups_at.items() if a != mine]
            results = await asyncio.gather(*calls, return_exceptions=True)
            if any(isinstance(r, BaseException) for r in results):
                abandon(run)  # a peer is unreachable: this run cannot finish

        if len(groups_at) > 1 or mine not in groups_at:
            worker.loop.add_callback(send_all)

    def _lost(self, exc):
        abandon(self.run)
        raise RunLost(f"{self.what}: run {self.run} lost a peer ({exc})") from exc

    def _check(self):
        """Raises :class:`RunLost` when the run was abandoned or the task cancelled."""
        if self.run in _DEAD_RUNS:
            raise RunLost(f"{self.what}: run {self.run} was abandoned")
        ts = self.worker.state.tasks.get(self.key)
        if ts is None or ts.state not in ("executing", "long-running"):
            raise RunLost(f"{self.what}: task {self.key} was cancelled")

    def gather(self, step, own):
        """Every group's partial of ``step`` (this group's is ``own``), in group order."""
        got = {self.g: own}
        channel = self.channel
        if channel is not None and _steps_on_channel(step):
            from dml import _direct

            need = {(step, h) for h in channel.inc}
            try:
                channel.wait(need, POLL, self._check)
            except _direct.PeerGone as exc:
                self._lost(exc)
            for key in need:
                kind, value = channel.inbox.pop(key)
                if kind == _direct.KIND_DATA:
                    got[key[1]] = value
        return self._gather_box(step, got)

    def _gather_box(self, step, got):
        """``got`` completed from the messages that came in memory or through the handler."""
        run, g, n_groups = self.run, self.g, self.n_groups
        with _COND:
            while True:
                if run in _DEAD_RUNS:
                    raise RunLost(f"{self.what}: run {run} was abandoned")
                for h in range(n_groups):
                    if h not in got and (run, step, h, g) in _BOX:
                        got[h] = _BOX.pop((run, step, h, g))
                if len(got) == n_groups:
                    return [got[h] for h in range(n_groups)]
                if not _COND.wait(timeout=POLL):
                    self._check()


@contextlib.contextmanager
def long_lived(run, g, addresses, what):
    """Inside a run's task: the task leaves the worker's thread pool (every group's task must
    run at once, on however many threads), the process is tuned for the run while it goes on
    (:func:`_tune_process`) and the task's thread is hidden from the worker's sampling profiler
    (:func:`_not_sampled`). Yields the group's :class:`Link`."""
    from distributed import get_worker, secede

    worker = get_worker()
    install(worker)
    key = worker.get_current_task()
    secede()
    _tune_process(True)
    link = Link(worker, key, run, g, addresses, what)
    try:
        with _not_sampled(worker):
            link.open()
            yield link
    finally:
        link.close()
        _tune_process(False)


@contextlib.contextmanager
def _not_sampled(worker):
    """Hide the calling task's thread from the worker's statistical profiler while the run goes
    on. Every 10 ms (``distributed.worker.profile.interval``) the worker's event loop walks the
    stack of every thread running a task, holding the interpreter lock; a run's thread, which
    gives the lock up and takes it back around every numba kernel, then waited for the event
    loop so often that a one-group boosting fit took 2.5 to 3.5 times its CPU time in wall time
    on a loaded 2-core machine (1.0 to 1.1 times with the thread hidden). The profile of a run
    would only show the run's loop anyway."""
    lock = getattr(worker, "active_threads_lock", None)
    threads = getattr(worker, "active_threads", None)
    if lock is None or not isinstance(threads, dict):
        yield
        return
    ident = threading.get_ident()
    with lock:
        key = threads.pop(ident, None)
    try:
        yield
    finally:
        if key is not None:
            with lock:
                threads[ident] = key


#: Python's thread switch interval (seconds) while a run goes on in the process. Every step
#: hands a message between a run's thread and the worker's event loop thread (both ways); at
#: Python's default 5 ms, each hand-over can wait that long for the other thread to give up
#: the interpreter lock; 1 ms made boosting fits 1.5 to 2.5 times faster than 5 ms (measured
#: on a loaded 2-core machine; 0.2 ms and 0.05 ms were not faster).
_SWITCH_INTERVAL = 0.001

#: glibc's allocator settings while a run goes on (bytes). A nanny starts its worker with
#: ``MALLOC_TRIM_THRESHOLD_=65536`` (distributed's default, so that freed memory goes back to the
#: system), which also fixes the size from which an allocation gets pages of its own at
#: 128 KiB (glibc otherwise raises that size as such arrays are freed). A run allocates and
#: frees such arrays all the time (a wave's histograms are 180 KiB a node, its lists of rows
#: 160 KiB a block), and fresh pages must be faulted in and zeroed by the kernel every time:
#: that was 40% of a boosting run's CPU time on a worker. So in a process started with either
#: setting, arrays up to 32 MiB (glibc's maximum) come from the heap during a run and up to
#: 256 MiB of free heap is kept; afterwards the settings are restored and the free memory is
#: given back. A process without them keeps glibc's own adaptive settings.
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_TUNED = {"runs": 0, "switch": None}


def _libc():
    """glibc's ``mallopt`` and ``malloc_trim`` when the process started with fixed allocator
    settings (see above), else None (adaptive settings, or another C library or system)."""
    import os

    if not sys.platform.startswith("linux") or not any(k in os.environ for k in _MALLOC_ENV):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl's mallopt does nothing)
        return libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None


def _malloc_defaults():
    """The allocator settings the process started with: its environment's or glibc's."""
    import os

    def env(name):
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            return 128 << 10  # glibc's default for both

    return tuple(env(k) for k in _MALLOC_ENV)


def _tune_process(enter):
    """While any run is in this process: a shorter thread switch interval and the allocator
    settings above; restored when the last run ends."""
    with _COND:
        libc = _libc()
        if enter:
            if _TUNED["runs"] == 0:
                _TUNED["switch"] = sys.getswitchinterval()
                sys.setswitchinterval(min(_SWITCH_INTERVAL, _TUNED["switch"]))
                if libc is not None:
                    libc[0](_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
                    libc[0](_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
            _TUNED["runs"] += 1
        else:
            _TUNED["runs"] -= 1
            if _TUNED["runs"] == 0:
                sys.setswitchinterval(_TUNED["switch"])
                if libc is not None:
                    mmap, trim = _malloc_defaults()
                    libc[0](_M_MMAP_THRESHOLD, mmap)
                    libc[0](_M_TRIM_THRESHOLD, trim)
                    libc[1](0)


# ---------------------------------------------------------------------------- client side
def cluster_client():
    """The ``distributed`` client Dask computes with now, or None (local schedulers)."""
    import dask

    from dml.runtime import active_client

    client = active_client()
    if client is None:
        return None
    scheduler = dask.base.get_scheduler()
    return client if getattr(scheduler, "__self__", None) is client else None


def _install_and_hold(keys, dask_worker=None):
    # One call does what took four round trips (the workers' ids, the handler, who holds
    # what and how big it is): the worker's id as the scheduler reports it
    # (``scheduler_info``'s "id"), and the bytes of each of ``keys`` it holds in memory.
    install(dask_worker)
    tasks = dask_worker.state.tasks
    return dask_worker.name, {k: int(tasks[k].nbytes or 0) for k in keys
                              if k in tasks and tasks[k].state == "memory"}


def placement_and_ids(client, futures):
    """``(workers, ids, nbytes)``: :func:`placement`'s workers, the id of every live worker
    (``{address: id}``, as ``Client.scheduler_info`` gives it) to tell whether a new run can
    keep the placement, and the bytes of every future held in memory (``{key: nbytes}``)."""
    answers = client.run(_install_and_hold, [f.key for f in futures], on_error="ignore")
    workers = sorted(answers)
    if not workers:
        raise RuntimeError("the cluster has no workers")
    held: dict = {}
    nbytes: dict = {}
    for a in workers:
        for k, n in answers[a][1].items():
            held.setdefault(k, a)
            nbytes.setdefault(k, n)
    out = [held.get(f.key, workers[g % len(workers)]) for g, f in enumerate(futures)]
    return out, {a: answers[a][0] for a in workers}, nbytes


def worker_ids(client) -> dict:
    """``{address: id}`` of every live worker, in one call to the workers that also adds the
    message handler to them (:func:`placement_and_ids` without asking where data is)."""
    answers = client.run(_install_and_hold, [], on_error="ignore")
    return {a: v[0] for a, v in answers.items() if isinstance(v, tuple)}


def placement(client, futures):
    """The worker of every group: where its data (``futures[g]``) is, else spread over the
    live workers (those that have the message handler). One call to the workers, which adds
    the handler."""
    return placement_and_ids(client, futures)[0]


#: Seconds within which every task of a run must be running. A worker that is paused (its
#: memory above distributed's pause fraction) or busy with other work starts no new task, and
#: the groups that did start would wait for its partials for ever.
START_TIMEOUT = 60.0


def _running(keys, dask_worker=None):
    # Client.run passes the worker as the keyword ``dask_worker``: it must not be the first
    # positional parameter, or the call fails and no task is ever seen running.
    tasks = dask_worker.state.tasks
    return [k for k in keys
            if k in tasks and tasks[k].state in ("executing", "long-running", "memory")]


def wait_run(client, futures, addresses, what="a run"):
    """Group 0's result, or None when the run was lost (a worker gone, a peer unreachable).
    Raises :class:`RunCannotStart` when not all of its tasks run within ``START_TIMEOUT``."""
    from distributed import wait

    started, all_running = time.monotonic(), False
    while True:
        try:
            wait(futures, timeout=POLL)
        except TimeoutError:
            pass
        if all(f.status == "finished" for f in futures):
            return futures[0].result()
        # Some tasks may finish before the others here: only a cancelled one ends the run.
        if _failed(client, futures, addresses, ended=("cancelled",)):
            return None
        if not all_running and time.monotonic() - started > START_TIMEOUT:
            all_running = _all_started(client, futures, what)


def execute(client, futures, run, addresses, what="a run", tidy_finished=True):
    """Wait for a submitted run (:func:`wait_run`), then make its stragglers stop and forget
    them. Returns group 0's result, or None when the run was lost and must be submitted again.

    A run whose tasks all finished has no stragglers and no message in flight (every group
    received every message before it finished); ``tidy_finished=False`` then skips telling
    the workers, two round trips a run."""
    finished = False
    try:
        result = wait_run(client, futures, addresses, what)
        finished = result is not None
        return result
    finally:
        if tidy_finished or not finished:
            client.run(abandon, run, on_error="ignore")
            client.cancel(futures)


def _failed(client, futures, addresses, ended=("cancelled", "finished")):
    """While a run goes on: raises a task's error, True when the run was lost (a task in a
    state of ``ended``, a task that raised :class:`RunLost`, or a worker gone), else False."""
    for f in futures:
        if f.status == "error":
            exc = f.exception()
            if isinstance(exc, RunLost):
                return True
            raise exc
    if any(f.status in ended for f in futures):
        return True
    return not set(addresses) <= set(client.nthreads())


_CALLS = None


def _calls():
    """The client's threads that make the calls of live runs (the client thread watches the
    run's tasks meanwhile)."""
    global _CALLS
    if _CALLS is None:
        from concurrent.futures import ThreadPoolExecutor

        _CALLS = ThreadPoolExecutor(32, thread_name_prefix="dml-live-run")
    return _CALLS


class LiveRun:
    """A submitted run whose tasks take several steps from the client: every group's task
    waits for its input of a step with :meth:`Link.receive` and group 0 posts the step's result
    with :func:`post`. The tasks start and make their links once; each :meth:`step` then costs
    one call to the workers (client to scheduler to workers and back) instead of a submission
    and the tasks' start. The client keeps what a step starts from, so a lost run is submitted
    again from there; :meth:`close` ends the run."""

    def __init__(self, client, futures, run, addresses, what="a run", after=()):
        self.client, self.futures, self.run = client, futures, run
        self.addresses, self.what = list(addresses), what
        #: Futures the run's tasks read that may still be computing (a run submitted on top
        #: of them): ``START_TIMEOUT`` counts from when they are all done.
        self.after = list(after)
        self.groups_at: dict = {}
        for h, a in enumerate(addresses):
            self.groups_at.setdefault(a, []).append(h)
        self.steps = 0
        self.all_running = False

    def step(self, value):
        """Group 0's result of the next step from input ``value``, or None when the run was
        lost (submit a new one). Raises :class:`RunCannotStart` when not all of the run's
        tasks run within ``START_TIMEOUT``, and a task's error."""
        from concurrent.futures import wait

        client, futures = self.client, self.futures
        call = _calls().submit(client.run, _step_call, self.run, self.steps, value,
                               self.groups_at, self.addresses[0],
                               workers=list(self.groups_at), on_error="return")
        started = time.monotonic()
        while True:
            wait([call], timeout=POLL)
            if call.done():
                try:
                    out = call.result().get(self.addresses[0])
                except (OSError, KeyError):  # a worker left while the call went on
                    return None
                if isinstance(out, tuple) and out and out[0] == "done":
                    self.steps += 1
                    self.all_running = True
                    return out[1]
                return None
            if _failed(client, futures, self.addresses):
                return None
            if self.after:
                if any(f.status != "finished" for f in self.after):
                    started = time.monotonic()  # the inputs are not there yet
                    continue
                self.after = []
            if not self.all_running and time.monotonic() - started > START_TIMEOUT:
                self.all_running = _all_started(client, futures, self.what)

    def close(self):
        """End the run: the workers forget it and its tasks, waiting for a step, return; a
        task still running after ``POLL`` seconds (inside a step) is cancelled."""
        from distributed import wait

        self.client.run(abandon, self.run, on_error="ignore")
        try:
            wait(self.futures, timeout=POLL)
        except TimeoutError:
            self.client.cancel(self.futures)


def _all_started(client, futures, what):
    """True when every task of a run runs; raises :class:`RunCannotStart` otherwise."""
    keys = [f.key for f in futures]
    running = client.run(_running, keys, on_error="return")
    seen = {k for v in running.values() if isinstance(v, list) for k in v}
    seen |= {f.key for f in futures if f.status != "pending"}
    if not set(keys) <= seen:
        raise RunCannotStart(f"{len(set(keys) - seen)} of the {len(keys)} tasks of "
                             f"{what} did not start within {START_TIMEOUT:.0f} s "
                             f"(paused or busy workers)")
    return True


#: The long-lived tasks may keep state in worker memory beside the persisted blocks, and all
#: groups of a run must run at once. Near the memory limit (data larger than memory) that is
#: what makes workers pause or die, so runs are used only while the persisted blocks take at
#: most this share of the workers' memory; the chained graphs (same result) handle the rest.
HEADROOM_SHARE = 0.1


def has_headroom(client, persisted, limits=None, nbytes=None) -> bool:
    """Whether the persisted collections ``persisted`` leave the long-lived tasks room on the
    workers. ``limits`` (the workers' memory limits) and ``nbytes`` (``{key: bytes}`` of
    ``persisted``) when the caller knows them already, else asked here."""
    if limits is None:
        limits = [w.get("memory_limit") or 0
                  for w in client.scheduler_info()["workers"].values()]
    if not limits or min(limits) <= 0:
        return True  # no memory limit set
    if nbytes is None:
        nbytes = client.nbytes([p.key for p in persisted])
    return sum(int(v or 0) for v in nbytes.values()) <= HEADROOM_SHARE * sum(limits)
