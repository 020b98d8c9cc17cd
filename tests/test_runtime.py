"""dml.runtime.connect: reuse, address, environment variable, embedded cluster."""
import gc
import logging

import dask
import dask.array as da
import pytest
from distributed import Client

from dml import runtime


def test_reuses_the_active_client(inprocess_client):
    assert runtime.connect() is inprocess_client
    assert runtime.active_client() is inprocess_client


def test_no_client_means_none():
    assert runtime.active_client() is None


@pytest.mark.multiprocess
def test_connects_to_address_and_environment(process_cluster, monkeypatch):
    with runtime.connect(process_cluster.address) as client:
        assert client.scheduler.address == process_cluster.address
        assert len(client.scheduler_info()["workers"]) == 2
        assert da.ones(10, chunks=3).sum().compute() == 10
    monkeypatch.setenv(runtime.ADDRESS_ENV, process_cluster.address)
    with runtime.connect() as client:
        assert client.scheduler.address == process_cluster.address
    # the scheduler survives clients that connect() did not start a cluster for
    with Client(process_cluster.address, set_as_default=False) as c:
        assert len(c.scheduler_info()["workers"]) == 2


@pytest.mark.multiprocess
def test_honours_dasks_scheduler_address_setting(process_cluster, monkeypatch):
    monkeypatch.delenv(runtime.ADDRESS_ENV, raising=False)
    # $DASK_SCHEDULER_ADDRESS and Dask config files set this value.
    with dask.config.set({"scheduler-address": process_cluster.address}):
        with runtime.connect() as client:
            assert client.scheduler.address == process_cluster.address
        # Local cluster options still start an embedded cluster (distributed.Client would
        # refuse them next to the setting).
        with runtime.connect(n_workers=1, processes=False) as client:
            assert client.scheduler.address != process_cluster.address
            assert len(client.scheduler_info()["workers"]) == 1
        # dml's own variable comes first.
        monkeypatch.setenv(runtime.ADDRESS_ENV, "tcp://127.0.0.1:9")
        with pytest.raises(ConnectionError, match=r"from \$DML_SCHEDULER_ADDRESS"):
            runtime.connect(timeout="2s")


def test_local_options_conflict_with_address():
    with pytest.raises(TypeError, match="local options only apply"):
        runtime.connect("tcp://127.0.0.1:1", n_workers=2)


def test_unreachable_scheduler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(runtime.ADDRESS_ENV, "tcp://127.0.0.1:9")
    with pytest.raises(ConnectionError, match="could not reach the Dask scheduler"):
        runtime.connect(timeout="2s")


def test_embedded_cluster_logs_dashboard_and_closes(monkeypatch):
    monkeypatch.delenv(runtime.ADDRESS_ENV, raising=False)
    # Our own handler: an in-process LocalCluster lowers existing stream handlers to WARNING
    # (distributed's silence_logs), which would hide the record from caplog.
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger = logging.getLogger("dml")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with runtime.connect(n_workers=1, processes=False) as client:
            assert len(client.scheduler_info()["workers"]) == 1
            assert da.ones(10, chunks=3).sum().compute() == 10
            cluster = client.cluster
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert any("dashboard" in r.getMessage() for r in records)
    assert client.status == "closed" and cluster.status.name == "closed"


def test_default_options_size_the_cluster_for_the_machine():
    opts = runtime.default_local_options()
    assert opts["n_workers"] >= 1 and opts["threads_per_worker"] == 1 and opts["processes"]


def _default_clients_open():
    from distributed.client import _global_clients
    return [c for c in list(_global_clients.values()) if c.status != "closed"]


def test_tls_address_without_certificates_leaves_no_client_behind():
    # distributed.Client fails on a tls:// address without certificates after registering
    # itself as the default client, which then stays "connecting": every later dask.compute()
    # without a client hung on it (an order-dependent hang of the test suite).
    before = _default_clients_open()
    with pytest.raises(ConnectionError, match="uses TLS but no certificates were given"):
        runtime.connect("tls://127.0.0.1:9", timeout="2s")
    assert _default_clients_open() == before
    assert dask.compute(da.arange(4, chunks=2).sum())[0] == 6


def test_failed_clients_are_closed():
    # The clean-up for any Client that fails the same way (distributed's registry, by hand).
    # distributed's registry holds its clients weakly: the failed one stays alive through the
    # traceback (its constructor's frame), kept here until the checks are done; without it a
    # garbage collection in between emptied the registry (a flaky failure under load).
    before = runtime._default_clients()
    with pytest.raises(TypeError, match="ssl_context") as failed:
        Client("tls://127.0.0.1:9", timeout="2s")
    gc.collect()  # as a collection at any later allocation would
    stuck = [c for c in _default_clients_open() if c not in before]
    assert stuck and stuck[0].status == "connecting"
    runtime._close_failed_clients(before)
    assert all(c.status == "closed" for c in stuck)
    del failed
