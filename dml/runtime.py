"""Connect to a Dask cluster: the only place in dml that creates a ``distributed.Client``.

Estimators never create clients. They run on whatever Dask scheduler is current: the active
``distributed.Client`` if there is one, otherwise Dask's threaded scheduler. This module gives
scripts, notebooks and the ``dml`` command one way to obtain a client.
"""
from __future__ import annotations

import logging
import os
from typing import Any

import dask
from distributed import Client
from distributed.security import Security

__all__ = ["connect", "default_local_options", "active_client", "ADDRESS_ENV", "TLS_ENV",
           "tls_security"]

logger = logging.getLogger("dml")

#: Environment variable naming the scheduler to connect to when no address is given.
ADDRESS_ENV = "DML_SCHEDULER_ADDRESS"

#: Environment variables holding the TLS files (CA bundle, client certificate, private key).
TLS_ENV = {"ca_file": "DML_TLS_CA_FILE", "cert": "DML_TLS_CERT", "key": "DML_TLS_KEY"}


def tls_security(ca_file: str | None = None, cert: str | None = None, key: str | None = None,
                 *, environ=None):
    """A ``distributed.Security`` for ``tls://`` schedulers, or ``None`` when no TLS is asked for.

    Each of ``ca_file``, ``cert`` and ``key`` falls back to its ``$DML_TLS_*`` variable
    (:data:`TLS_ENV`). ``cert`` may hold the key too (then ``key`` can be omitted). The CA is
    required: without it the scheduler's certificate could not be verified.

    Examples
    --------
    >>> tls_security(environ={}) is None
    True
    """
    environ = os.environ if environ is None else environ
    given = {"ca_file": ca_file, "cert": cert, "key": key}
    files = {k: v or environ.get(TLS_ENV[k]) or None for k, v in given.items()}
    if not any(files.values()):
        return None
    if not files["ca_file"] or not files["cert"]:
        missing = [f"{k} (${TLS_ENV[k]})" for k in ("ca_file", "cert") if not files[k]]
        raise ValueError(f"TLS needs a CA file and a client certificate; missing: "
                         f"{', '.join(missing)}")
    for k, path in files.items():
        if path and not os.path.isfile(path):
            raise FileNotFoundError(f"TLS {k} file not found: {path}")
    from distributed.security import Security

    return Security(tls_ca_file=files["ca_file"], tls_client_cert=files["cert"],
                    tls_client_key=files["key"], require_encryption=True)


def _default_clients() -> list:
    """The clients registered as candidates for Dask's default client, oldest first."""
    try:
        from distributed.client import _global_clients
    except ImportError:  # a future distributed without the registry: nothing to clean
        return []
    return [c for _, c in sorted(_global_clients.items())]


def _close_failed_clients(before: list) -> None:
    """Close the clients that appeared since ``before`` and never connected.

    distributed registers a Client as the default before it connects; one that failed to start
    would otherwise be what ``dask.compute`` picks for the rest of the process, waiting on it
    for ever.
    """
    known = {id(c) for c in before}
    for c in _default_clients():
        if id(c) not in known and c.status in ("newly-created", "connecting"):
            c.close()


def active_client() -> Client | None:
    """Return the ``distributed.Client`` that Dask would use now, or ``None``."""
    try:
        from distributed import get_client

        return get_client()
    except ValueError:
        return None


def _usable_cores() -> int:
    # sched_getaffinity respects taskset/cgroup CPU sets; os.cpu_count() does not.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


def default_local_options() -> dict:
    """Options of the embedded ``LocalCluster``: one single-threaded worker process per core.

    One thread per worker because the per-block kernels are NumPy/BLAS code that already uses
    the core fully; more threads would contend for it. Memory is split evenly ("auto").
    """
    return {
        "n_workers": _usable_cores(),
        "threads_per_worker": 1,
        "processes": True,
        "memory_limit": "auto",
        "dashboard_address": ":0",
    }


def connect(address: str | None = None, *, security: Any = None, timeout: str | float = "30s",
            **local_options) -> Client:
    """Return a Dask client for dml to run on.

    Resolution order:

    1. an already active ``distributed.Client`` (returned as it is; ``address`` must then be
       ``None`` or that client's own scheduler address);
    2. the scheduler at ``address``; when ``address`` is None, at ``$DML_SCHEDULER_ADDRESS``,
       else at Dask's own ``scheduler-address`` setting (``$DASK_SCHEDULER_ADDRESS`` or a Dask
       configuration file);
    3. a new embedded ``LocalCluster`` of worker processes sized for this machine
       (see :func:`default_local_options`; ``local_options`` override them).

    Without ``security``, a scheduler connection uses Dask's TLS configuration
    (``distributed.comm.tls.*``: ``ca-file``, ``client.cert``, ``client.key``, e.g. from
    ``$DASK_DISTRIBUTED__COMM__TLS__CA_FILE``), as ``distributed.Client`` does.

    The client works as a context manager: leaving the ``with`` block closes it, and a cluster
    that ``connect`` started is shut down with it. The dashboard link is logged at INFO level on
    the ``dml`` logger.

    Parameters
    ----------
    address : str, optional
        Scheduler address such as ``"tcp://10.0.0.5:8786"`` or ``"tls://scheduler:8786"``.
    security : distributed.Security, optional
        TLS settings for connecting to ``address`` (or for the embedded cluster).
    timeout : str or float, default "30s"
        How long to wait for the scheduler at ``address``.
    **local_options
        Passed to ``distributed.LocalCluster`` when an embedded cluster is started, e.g.
        ``n_workers=2, threads_per_worker=1, processes=False``.

    Returns
    -------
    distributed.Client

    Examples
    --------
    >>> import dml.runtime
    >>> with dml.runtime.connect(n_workers=1, processes=False) as client:
    ...     print(len(client.scheduler_info()["workers"]))
    1
    """
    current = active_client()
    if current is not None and address is None and not local_options:
        logger.info("dml: reusing the active Dask client; dashboard: %s", current.dashboard_link)
        return current

    source = "the address argument"
    if address is None and os.environ.get(ADDRESS_ENV):
        address, source = os.environ[ADDRESS_ENV], f"${ADDRESS_ENV}"
    if address is None and not local_options and dask.config.get("scheduler-address", None):
        # Dask's own setting, which distributed.Client() would use too.
        address = dask.config.get("scheduler-address")
        source = "Dask's scheduler-address setting ($DASK_SCHEDULER_ADDRESS or a config file)"
    if address is not None:
        if local_options:
            raise TypeError(
                f"connect() got local cluster options {sorted(local_options)} together with the "
                f"scheduler address {address!r}; local options only apply when dml starts an "
                "embedded cluster. Drop them, or drop the address (and unset "
                f"${ADDRESS_ENV}).")
        if security is None:
            # Dask's TLS settings (distributed.comm.tls.*), as distributed.Client reads them.
            security = Security()
        no_certificates = ConnectionError(
            f"the scheduler at {address!r} (from {source}) uses TLS but no certificates "
            "were given: pass security=dml.runtime.tls_security(ca_file, cert, key), set "
            "$DML_TLS_CA_FILE/$DML_TLS_CERT/$DML_TLS_KEY, or configure Dask's "
            "distributed.comm.tls.ca-file, .client.cert and .client.key.")
        # Checked before a Client exists: distributed.Client fails on this inside its start,
        # after registering itself as the process's default client, and leaves that client
        # "connecting" for ever, so every later dask.compute() without a client would hang on it.
        if (str(address).startswith("tls://")
                and security.get_connection_args("client").get("ssl_context") is None):
            raise no_certificates
        scheduler_setting = dask.config.get("scheduler", None)
        registered = _default_clients()
        try:
            client = Client(address, security=security, timeout=timeout)
        except TypeError as exc:
            dask.config.set(scheduler=scheduler_setting)  # a failed Client leaves it set
            _close_failed_clients(registered)
            # distributed's message for a tls:// address without certificates
            # ("TLS expects a `ssl_context` argument ...") names none of the ways to give them.
            if "ssl_context" not in str(exc):
                raise
            raise no_certificates from None
        except OSError as exc:
            dask.config.set(scheduler=scheduler_setting)
            raise ConnectionError(
                f"could not reach the Dask scheduler at {address!r} (from {source}) within "
                f"{timeout}: {exc}. Check that `dask scheduler` is running there and the "
                f"address/port are right, or unset ${ADDRESS_ENV} and DASK_SCHEDULER_ADDRESS "
                "to use an embedded local cluster.") from exc
        logger.info("dml: connected to %s; dashboard: %s", address, client.dashboard_link)
        return client

    options = {**default_local_options(), **local_options}
    if security is not None:
        options["security"] = security
    # Client(**options) starts the LocalCluster itself, so closing the client closes it too.
    # Local options ask for an embedded cluster even where Dask names a scheduler, which
    # Client() would otherwise try to use with them (and refuse).
    with dask.config.set({"scheduler-address": None}):
        client = Client(**options)
    logger.info("dml: started a local cluster with %d worker(s); dashboard: %s",
                len(client.scheduler_info()["workers"]), client.dashboard_link)
    return client
