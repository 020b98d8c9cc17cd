"""Deployment files: the container image recipe and the Kubernetes manifests.

Without a Docker engine or a Kubernetes cluster, the files are checked for what can be checked:
schemas (kubernetes-validate for built-in kinds, the Dask operator's CRD schema for DaskJob),
the security and sizing rules the manifests promise, the Dockerfile's pinned base / non-root user /
installed entry points, and — the real test — the commands, arguments and environment the
manifests declare, started as local processes (service names mapped to 127.0.0.1, ports to free
local ports, volumes to temporary directories), training a model end to end, plain and TLS.
"""
from __future__ import annotations

import json
import re
import shlex
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import yaml

import dml

from _deploy_helpers import (Processes, bin_path, free_port, make_certificates,  # noqa: E402
                             wait_for_workers)

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
MANIFESTS = ["plain.yaml", "tls.yaml", "daskjob.yaml"]
K8S_VERSION = "1.30"


def load(name):
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def by_kind(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or
                                                      d["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''}"
    return found[0]


def pod_specs(doc):
    """(role, pod spec) of every pod template in a manifest document."""
    if doc["kind"] in ("Deployment", "Job"):
        yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]
    elif doc["kind"] == "DaskJob":
        yield "job", doc["spec"]["job"]["spec"]
        yield "worker", doc["spec"]["cluster"]["spec"]["worker"]["spec"]
        yield "scheduler", doc["spec"]["cluster"]["spec"]["scheduler"]["spec"]


# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------

def _unknown_fields(value, schema, path="") -> list[str]:
    """Fields the (pruning) CRD schema does not declare: the API server would drop them."""
    if isinstance(value, dict) and "properties" in schema and \
            not schema.get("x-kubernetes-preserve-unknown-fields"):
        out = []
        for k, v in value.items():
            if k in schema["properties"]:
                out += _unknown_fields(v, schema["properties"][k], f"{path}.{k}")
            elif not isinstance(schema.get("additionalProperties"), dict):
                out.append(f"{path}.{k}")
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [u for i, v in enumerate(value)
                for u in _unknown_fields(v, schema["items"], f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifests_pass_schema_validation(name):
    kv = pytest.importorskip("kubernetes_validate")
    jsonschema = pytest.importorskip("jsonschema")
    crd = json.loads((K8S / "schemas" / "daskjob-kubernetes.dask.org-v1.json").read_text())
    docs = load(name)
    assert docs
    for doc in docs:
        if doc["kind"] == "DaskJob":
            assert doc["apiVersion"] == "kubernetes.dask.org/v1"
            jsonschema.validate(doc, crd)
            assert _unknown_fields(doc["spec"], crd["properties"]["spec"], ".spec") == []
        else:
            kv.validate(doc, K8S_VERSION, strict=True)


def test_crd_schema_catches_mistakes():
    jsonschema = pytest.importorskip("jsonschema")
    crd = json.loads((K8S / "schemas" / "daskjob-kubernetes.dask.org-v1.json").read_text())
    doc = by_kind(load("daskjob.yaml"), "DaskJob")
    bad = json.loads(json.dumps(doc))
    del bad["spec"]["cluster"]
    with pytest.raises(jsonschema.ValidationError, match="'cluster' is a required property"):
        jsonschema.validate(bad, crd)
    bad = json.loads(json.dumps(doc))
    bad["spec"]["cluster"]["spec"]["worker"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd)
    bad = json.loads(json.dumps(doc))
    bad["spec"]["job"]["spec"]["containers"][0]["comand"] = ["dml"]
    assert _unknown_fields(bad["spec"], crd["properties"]["spec"], ".spec") == [
        ".spec.job.spec.containers[0].comand"]


def test_built_in_validation_catches_mistakes():
    kv = pytest.importorskip("kubernetes_validate")
    doc = by_kind(load("plain.yaml"), "Deployment", "dask-worker")
    doc["spec"]["template"]["spec"]["containers"][0]["comand"] = ["dask"]
    with pytest.raises(kv.ValidationError):
        kv.validate(doc, K8S_VERSION, strict=True)
    doc = by_kind(load("plain.yaml"), "Deployment", "dask-worker")
    doc["spec"]["replicas"] = "2"
    with pytest.raises(kv.ValidationError):
        kv.validate(doc, K8S_VERSION, strict=True)


# ---------------------------------------------------------------------------------------------
# What the manifests promise
# ---------------------------------------------------------------------------------------------

_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "KiB": 2**10, "MiB": 2**20,
          "GiB": 2**30, "TiB": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "KB": 10**3,
          "MB": 10**6, "GB": 10**9, "": 1}


def nbytes(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", str(text))
    assert m and m.group(2) in _UNITS, text
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def cpus(text) -> float:
    text = str(text)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def arg_value(args, flag):
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("name", MANIFESTS)
def test_pods_run_unprivileged_with_probes_and_matched_resources(name):
    docs = load(name)
    roles = set()
    for doc in docs:
        for role, spec in pod_specs(doc):
            roles.add(role)
            assert spec["securityContext"]["runAsNonRoot"] is True, role
            assert spec["securityContext"]["runAsUser"] != 0, role
            assert spec.get("automountServiceAccountToken") is False, role
            for c in spec["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False, role
                assert sc["capabilities"]["drop"] == ["ALL"], role
                assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"]
                assert not c["image"].endswith(":latest") and ":" in c["image"], role
                command = c["command"] + c["args"]
                if command[:2] == ["dask", "worker"]:
                    # --nthreads / --memory-limit equal to the container's CPUs and memory.
                    assert float(arg_value(command, "--nthreads")) == \
                        cpus(c["resources"]["limits"]["cpu"]) == \
                        cpus(c["resources"]["requests"]["cpu"])
                    assert nbytes(arg_value(command, "--memory-limit")) == \
                        nbytes(c["resources"]["limits"]["memory"])
                if command[:2] in (["dask", "worker"], ["dask", "scheduler"]):
                    assert c["readinessProbe"] and c["livenessProbe"], role
    assert len(roles) == 3


@pytest.mark.parametrize("name", MANIFESTS)
def test_dashboard_stays_inside_and_only_job_and_workers_reach_the_scheduler(name):
    docs = load(name)
    services = [d for d in docs if d["kind"] == "Service"]
    services += [by_kind(docs, "DaskJob")["spec"]["cluster"]["spec"]["scheduler"]["service"]] \
        if name == "daskjob.yaml" else []
    assert services
    for svc in services:
        spec = svc.get("spec", svc)
        assert spec.get("type", "ClusterIP") == "ClusterIP"
        assert {p["port"] for p in spec["ports"]} == {8786, 8787}
    policy = [d for d in docs if d["kind"] == "NetworkPolicy" and
              "scheduler" in d["spec"]["podSelector"]["matchLabels"].values()]
    assert len(policy) == 1
    (rule,) = policy[0]["spec"]["ingress"]
    allowed = set()
    for peer in rule["from"]:
        if "namespaceSelector" in peer:  # the operator's controller (DaskJob only)
            assert peer["podSelector"]["matchLabels"] == {
                "app.kubernetes.io/name": "dask-kubernetes-operator"}
            continue
        for expr in peer["podSelector"]["matchExpressions"]:
            if expr["key"].endswith("component"):
                allowed |= set(expr["values"])
    assert allowed in ({"job", "worker"}, {"job-runner", "worker"})


def test_job_file_in_config_map_is_a_valid_job(tmp_path):
    from dml import cli

    for name in MANIFESTS:
        cm = by_kind(load(name), "ConfigMap", "dml-job")
        path = tmp_path / name / "job.yaml"
        path.parent.mkdir()
        path.write_text(cm["data"]["job.yaml"])
        job = cli.load_job(path)
        assert job.model_params["checkpoint_dir"].startswith("/output/")


def test_daskjob_runs_dml_train_on_the_operator_cluster():
    doc = by_kind(load("daskjob.yaml"), "DaskJob")
    job = doc["spec"]["job"]["spec"]
    c = job["containers"][0]
    assert c["command"] + c["args"][:1] == ["dml", "train", "/config/job.yaml"]
    assert arg_value(c["args"], "--scheduler") == "$(DASK_SCHEDULER_ADDRESS)"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in job["volumes"]}
    assert mounts["job"] == "/config" and volumes["job"]["configMap"]["name"] == "dml-job"
    assert arg_value(c["args"], "--output").startswith(mounts["output"] + "/")
    assert "persistentVolumeClaim" in volumes["output"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_workers_preload_kernels_and_jobs_log_progress(name):
    """Workers load the image's compiled kernels as they start; the job logs dml's INFO lines
    (epoch summaries, checkpoint resumes) so that ``kubectl logs`` shows them."""
    roles = {}
    for doc in load(name):
        for role, spec in pod_specs(doc):
            roles[role] = spec["containers"][0]
    workers = [c for role, c in roles.items() if "worker" in role]
    jobs = [c for c in roles.values() if c["command"][:2] == ["dml", "train"]]
    assert workers and jobs
    for c in workers:
        assert c["command"] == ["dask", "worker"]
        assert arg_value(c["args"], "--preload") == "dml.worker_setup"
    for c in jobs:
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        assert env.get("DML_LOG_LEVEL") == "info"


def test_daskjob_says_what_happens_when_the_job_fails():
    """The operator never retries a failed job pod: the manifest must not promise a resume."""
    text = (K8S / "daskjob.yaml").read_text()
    job = by_kind(load("daskjob.yaml"), "DaskJob")["spec"]["job"]["spec"]
    assert job["restartPolicy"] == "Never"
    assert "restarted Job pod" not in text and "DML_SCHEDULER_ADDRESS" not in text
    assert "does not retry" in text
    readme = (K8S / "README.md").read_text()
    assert "kubectl delete daskjob dml-train && kubectl apply -f deploy/kubernetes/daskjob.yaml" \
        in readme


# ---------------------------------------------------------------------------------------------
# Dockerfile
# ---------------------------------------------------------------------------------------------

def dockerfile_instructions():
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_pinned_base_non_root_user_and_installed_entrypoints():
    ins = dockerfile_instructions()
    bases = [rest for op, rest in ins if op == "FROM"]
    assert bases
    for base in bases:
        image = base.split()[0]
        assert ":" in image and not image.endswith(":latest"), base
        tag = image.split("@")[0].rsplit(":", 1)[1]
        assert re.match(r"\d+\.\d+\.\d+-slim", tag), f"base not pinned to a patch release: {base}"
    users = [rest for op, rest in ins if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_user_at = max(i for i, (op, _) in enumerate(ins) if op == "USER")
    assert not any(op == "RUN" for op, _ in ins[last_user_at:]), "RUN after dropping root"
    uid = users[-1].split(":")[0]
    for name in MANIFESTS:  # the manifests run as the image's user
        for doc in load(name):
            for _, spec in pod_specs(doc):
                assert str(spec["securityContext"]["runAsUser"]) == uid
    # Dependencies installed from the pinned list, dml itself without dependencies.
    runs = " ".join(rest for op, rest in ins if op == "RUN")
    assert "-r /tmp/requirements.txt" in runs and "--no-deps ." in runs
    pins = [line for line in (DOCKERFILE.parent / "requirements.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.]+", p) for p in pins), pins
    pinned = {p.split("==")[0].lower() for p in pins}
    assert {"dask", "distributed", "numpy", "pandas", "scikit-learn", "pyarrow",
            "pyyaml"} <= pinned
    copied = [rest.split()[0] for op, rest in ins if op == "COPY"]
    assert {"pyproject.toml", "dml", "deploy/docker/requirements.txt"} <= set(copied)
    for src in copied:
        assert (ROOT / src).exists(), src
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignored and "dml" not in ignored
    # Every command the manifests run is a console script of a package the image installs.
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("dml") == "dml.cli:main"
    assert scripts.get("dask", "").startswith("dask")
    for name in MANIFESTS:
        for doc in load(name):
            for _, spec in pod_specs(doc):
                for c in spec["containers"]:
                    assert c["command"][0] in ("dml", "dask"), c["command"]


# ---------------------------------------------------------------------------------------------
# The manifests' commands as local processes
# ---------------------------------------------------------------------------------------------

def _container(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]


def _localise(words, ports: dict, paths: dict) -> list[str]:
    """Service name -> 127.0.0.1, container ports -> free local ports, mounts -> temp dirs."""
    out = []
    for w in words:
        w = str(w).replace("dask-scheduler", "127.0.0.1")
        for port, local in ports.items():
            w = re.sub(rf"(?<![\d]){port}(?![\d])", str(local), w)
        for mount, local in paths.items():
            if w == mount or w.startswith(mount + "/"):
                w = str(local) + w[len(mount):]
                break
        out.append(w)
    return out


def check_probes(container, local_ports: dict) -> None:
    """Run the container's readiness and liveness probes against the local process."""
    import socket
    import urllib.request

    named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    for kind in ("readinessProbe", "livenessProbe"):
        probe = container[kind]
        if "httpGet" in probe:
            port = probe["httpGet"]["port"]
            port = local_ports[named.get(port, port)]
            url = f"http://127.0.0.1:{port}{probe['httpGet']['path']}"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.status == 200, (kind, url)
        else:
            port = probe["tcpSocket"]["port"]
            port = local_ports[named.get(port, port)]
            socket.create_connection(("127.0.0.1", port), timeout=10).close()


def _run_manifest(name: str, tmp_path: Path) -> Path:
    docs = load(name)
    scheduler = _container(by_kind(docs, "Deployment", "dask-scheduler"))
    worker_doc = by_kind(docs, "Deployment", "dask-worker")
    worker = _container(worker_doc)
    train = _container(by_kind(docs, "Job", "dml-train"))
    # Volumes: the ConfigMap's job file, the output volume, /tmp and the TLS Secret.
    (tmp_path / "config").mkdir()
    paths = {"/config": tmp_path / "config", "/output": tmp_path / "output",
             "/tmp": tmp_path / "tmp", "/etc/dml/tls": tmp_path / "tls"}
    # The job file names paths on the volumes too (checkpoint_dir on /output).
    (tmp_path / "config" / "job.yaml").write_text(
        by_kind(docs, "ConfigMap", "dml-job")["data"]["job.yaml"].replace(
            " /output/", f" {tmp_path / 'output'}/"))
    (tmp_path / "tmp").mkdir()
    if name == "tls.yaml":
        make_certificates(tmp_path / "tls")  # the Secret's ca.crt, tls.crt, tls.key
    ports = {8786: free_port(), 8787: free_port()}
    bins = {"dask": bin_path("dask"), "dml": bin_path("dml")}

    def argv(c, extra_ports=None):
        words = _localise(c["command"] + c["args"], {**ports, **(extra_ports or {})}, paths)
        return [bins.get(words[0], words[0])] + words[1:]

    def env(c):
        return {e["name"]: _localise([e["value"]], ports, paths)[0] for e in c.get("env", [])}

    with Processes(tmp_path) as procs:
        procs.start("scheduler", argv(scheduler), env(scheduler))
        n_workers = worker_doc["spec"]["replicas"]
        probes = [(scheduler, ports)]
        for i in range(n_workers):
            worker_ports = {8788: free_port()}
            procs.start(f"worker-{i}", argv(worker, worker_ports), env(worker))
            probes.append((worker, worker_ports))
        job_env = env(train)
        address = job_env["DML_SCHEDULER_ADDRESS"]
        security = None
        if address.startswith("tls://"):
            from dml.runtime import tls_security

            security = tls_security(environ=job_env)
        wait_for_workers(address, n_workers, security=security, procs=procs)
        for container, local_ports in probes:
            check_probes(container, {**ports, **local_ports})
        job = procs.start("job", argv(train), job_env)
        try:
            rc = job.wait(timeout=300)
        except Exception:
            raise AssertionError(f"the job did not finish:\n{procs.logs()}") from None
        assert rc == 0, f"{shlex.join(job.args)} exited {rc}:\n{procs.logs()}"
    output = Path(_localise([arg_value(train["args"], "--output")], ports, paths)[0])
    assert (output / "model.dml").exists(), procs.logs()
    return output


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("name", ["plain.yaml", "tls.yaml"])
def test_manifest_commands_train_a_model_as_local_processes(name, tmp_path):
    if name == "tls.yaml":
        pytest.importorskip("cryptography")
    output = _run_manifest(name, tmp_path)
    pipeline = dml.load(output / "model.dml")
    report = json.loads((output / "metrics.json").read_text())
    assert report["model"] == "sgd_classifier" and report["metrics"]["accuracy"] > 0.5
    model = pipeline.named_steps["model"]
    assert model.n_iter_ == 10 and np.isfinite(model.coef_).all()
    # The fit checkpointed to the output volume, as the ConfigMap's job file asks.
    assert (tmp_path / "output" / "checkpoints" / "synthetic_sgd" / "checkpoint.json").exists()


def _expand(words, env: dict) -> list[str]:
    """Kubernetes' $(VAR) substitution in command and args."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), str(w))
            for w in words]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_daskjob_commands_train_a_model_as_local_processes(tmp_path):
    """The DaskJob's scheduler, worker and job containers, with the environment the operator
    injects (DASK_SCHEDULER_ADDRESS for workers and the job, DASK_WORKER_NAME for workers)."""
    docs = load("daskjob.yaml")
    spec = by_kind(docs, "DaskJob")["spec"]
    cluster = spec["cluster"]["spec"]
    scheduler = cluster["scheduler"]["spec"]["containers"][0]
    worker = cluster["worker"]["spec"]["containers"][0]
    job = spec["job"]["spec"]["containers"][0]
    paths = {"/config": tmp_path / "config", "/output": tmp_path / "output",
             "/tmp": tmp_path / "tmp"}
    (tmp_path / "config").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "config" / "job.yaml").write_text(
        by_kind(docs, "ConfigMap", "dml-job")["data"]["job.yaml"].replace(
            " /output/", f" {tmp_path / 'output'}/"))
    ports = {8786: free_port(), 8787: free_port()}
    address = f"tcp://127.0.0.1:{ports[8786]}"
    bins = {"dask": bin_path("dask"), "dml": bin_path("dml")}

    def argv(c, env, extra_ports=None):
        words = _localise(_expand(c["command"] + c["args"], env),
                          {**ports, **(extra_ports or {})}, paths)
        return [bins.get(words[0], words[0])] + words[1:]

    with Processes(tmp_path) as procs:
        procs.start("scheduler", argv(scheduler, {}))
        n = cluster["worker"]["replicas"]
        probes = [(scheduler, ports)]
        for i in range(n):
            env = {"DASK_SCHEDULER_ADDRESS": address, "DASK_WORKER_NAME": f"dml-train-{i}"}
            local = {8788: free_port()}
            procs.start(f"worker-{i}", argv(worker, env, local), env)
            probes.append((worker, local))
        wait_for_workers(address, n, procs=procs)
        for container, local_ports in probes:
            check_probes(container, {**ports, **local_ports})
        env = {"DASK_SCHEDULER_ADDRESS": address}
        proc = procs.start("job", argv(job, env), env)
        rc = proc.wait(timeout=300)
        assert rc == 0, procs.logs()
    output = Path(_localise([arg_value(job["args"], "--output")], ports, paths)[0])
    model = dml.load(output / "model.dml").named_steps["model"]
    assert model.n_iter_ == 10 and np.isfinite(model.coef_).all()
