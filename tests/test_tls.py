"""TLS: `dml train` against a `dask scheduler` / `dask worker` cluster with --tls-* flags."""
from __future__ import annotations

import subprocess
import sys

import dask
import numpy as np
import pytest

pytest.importorskip("cryptography")

import dml  # noqa: E402
from dml import cli, runtime  # noqa: E402

from _deploy_helpers import (Processes, bin_path, child_env, free_port,  # noqa: E402
                             make_certificates, wait_for_workers)

JOB = """\
name: tls_sgd
data:
  generator: make_classification
  params: {n_samples: 2000, n_features: 6, n_informative: 4, chunks: 500, random_state: 0}
target: y
model:
  name: sgd_classifier
  params: {loss: log_loss, max_iter: 5, tol: null, random_state: 0}
split: {test_size: 0.25, random_state: 0}
metrics: [accuracy]
"""


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    certs = make_certificates(tmp / "certs")
    tls = ["--tls-ca-file", certs["ca"], "--tls-cert", certs["cert"], "--tls-key", certs["key"]]
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    procs = Processes(tmp)
    try:
        procs.start("scheduler", [bin_path("dask"), "scheduler", "--protocol", "tls", "--host",
                                  "127.0.0.1", "--port", str(port), "--dashboard-address",
                                  "127.0.0.1:0", *tls])
        for i in range(2):
            procs.start(f"worker-{i}", [bin_path("dask"), "worker", address, "--nthreads", "1",
                                        "--memory-limit", "1GiB", "--no-dashboard",
                                        "--name", f"worker-{i}", *tls])
        security = runtime.tls_security(certs["ca"], certs["cert"], certs["key"], environ={})
        wait_for_workers(address, 2, security=security, procs=procs)
        yield {"address": address, "certs": certs, "tmp": tmp, "procs": procs}
    finally:
        procs.stop()


def run_dml(*args, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "dml.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=child_env(env))


def test_tls_security_from_arguments_and_environment(tmp_path):
    certs = make_certificates(tmp_path)
    assert runtime.tls_security(environ={}) is None
    sec = runtime.tls_security(environ={"DML_TLS_CA_FILE": certs["ca"],
                                        "DML_TLS_CERT": certs["cert"],
                                        "DML_TLS_KEY": certs["key"]})
    assert sec.require_encryption and sec.tls_ca_file == certs["ca"]
    assert sec.tls_client_cert == certs["cert"] and sec.tls_client_key == certs["key"]
    with pytest.raises(ValueError, match="missing: ca_file"):
        runtime.tls_security(cert=certs["cert"], environ={})
    with pytest.raises(FileNotFoundError, match="TLS key file not found"):
        runtime.tls_security(certs["ca"], certs["cert"], str(tmp_path / "nope"), environ={})


def test_job_file_tls_section_is_resolved_and_checked(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB + "scheduler:\n  address: tls://scheduler:8786\n"
                         "  tls: {ca_file: certs/ca.crt, cert: certs/tls.crt, key: tls.key}\n")
    loaded = cli.load_job(job)
    assert loaded.scheduler["tls"] == {"ca_file": str(tmp_path / "certs" / "ca.crt"),
                                       "cert": str(tmp_path / "certs" / "tls.crt"),
                                       "key": str(tmp_path / "tls.key")}
    job.write_text(JOB + "scheduler:\n  address: tls://scheduler:8786\n  tls: {ca: x}\n")
    with pytest.raises(cli.JobError, match="scheduler.tls.ca: unknown field"):
        cli.load_job(job)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_connect_uses_dasks_tls_configuration(tls_cluster):
    certs, address = tls_cluster["certs"], tls_cluster["address"]
    settings = {"distributed.comm.tls.ca-file": certs["ca"],
                "distributed.comm.tls.client.cert": certs["cert"],
                "distributed.comm.tls.client.key": certs["key"]}
    with dask.config.set(settings):
        with runtime.connect(address, timeout="20s") as client:
            assert len(client.scheduler_info()["workers"]) == 2
    with pytest.raises(ConnectionError, match="uses TLS but no certificates were given"):
        runtime.connect(address, timeout="3s")


@pytest.mark.slow
@pytest.mark.multiprocess
def test_dml_train_over_tls(tls_cluster, tmp_path):
    certs, address = tls_cluster["certs"], tls_cluster["address"]
    # 1. TLS from the job file.
    job = tmp_path / "job.yaml"
    job.write_text(JOB + f"scheduler:\n  address: {address}\n  tls: {{ca_file: {certs['ca']}, "
                         f"cert: {certs['cert']}, key: {certs['key']}}}\n")
    proc = run_dml("train", job, "--output", tmp_path / "a")
    assert proc.returncode == 0, proc.stdout + proc.stderr + tls_cluster["procs"].logs()
    a = dml.load(tmp_path / "a" / "model.dml")
    # 2. TLS from flags (address from the environment). $DML_TLS_* variables are what the
    # tls.yaml manifest uses: tests/test_deploy.py runs them.
    plain = tmp_path / "plain.yaml"
    plain.write_text(JOB)
    proc = run_dml("train", plain, "--output", tmp_path / "b", "--tls-ca-file", certs["ca"],
                   "--tls-cert", certs["cert"], "--tls-key", certs["key"],
                   env={"DML_SCHEDULER_ADDRESS": address})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    b = dml.load(tmp_path / "b" / "model.dml")
    np.testing.assert_array_equal(a.named_steps["model"].coef_, b.named_steps["model"].coef_)
    # Without certificates the scheduler is unreachable: a one-line error, no traceback.
    proc = run_dml("train", plain, "--output", tmp_path / "d", "--scheduler", address,
                   "--timeout", "3")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "d" / "model.dml").exists()
