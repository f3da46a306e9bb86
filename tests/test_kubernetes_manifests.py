"""``deploy/kubernetes/`` (issue 33), every kustomization (the base, the overlays for 1
and 3 node replicas, TLS) rendered by ``kubectl kustomize`` and checked offline: every
object against the Kubernetes API schemas (kubernetes-validate, strict: no unknown
field), the pods as
the docs promise them (non-root, read-only root filesystem, gRPC health probes,
requests, Prometheus annotations, a disruption budget, a headless service), and the
deployment file in the ConfigMap against the StatefulSets: every placement is a pod
of theirs at its own address, every container's command is one ``millrace`` takes.
The TLS pod's probe is run against a real TLS server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from millrace.cli import build_parser
from millrace.deployment import Deployment
from tests.support import ROOT, free_port
from tests.support.certs import make_certs

KUBERNETES = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAYS = sorted(p for p in (KUBERNETES / "overlays").iterdir() if p.is_dir())
VERSION = "1.33"
CONFIG = "millrace-config"
TLS_PROBE = ["millrace", "health"]  # at $MILLRACE_HEALTH_ADDRESS, the pod's own


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` renders (kustomize built into kubectl)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with kustomize built in) is not installed")
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {directory}:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


RENDERED = {p.name: p for p in [BASE, *OVERLAYS]}


@pytest.fixture(scope="module", params=sorted(RENDERED))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize(RENDERED[request.param])


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def config_files(docs: list[dict[str, Any]]) -> dict[str, str]:
    [config] = [
        doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"].startswith(CONFIG)
    ]
    files: dict[str, str] = config["data"]
    return files


def base_files() -> list[Path]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [BASE / name for name in kustomization["resources"]]


def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(
    rendered: list[dict[str, Any]],
) -> None:
    for doc in rendered:
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_base_lists_every_manifest_and_file_beside_it() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    [generated] = kustomization["configMapGenerator"]
    assert set(generated["files"]) == {p.name for p in BASE.glob("*.toml")}


def test_node_replicas_render_as_each_overlay_says() -> None:
    counts = {}
    for directory in [BASE, *OVERLAYS]:
        [pages] = [
            s for s in of_kind(kustomize(directory), "StatefulSet")
            if s["metadata"]["name"] == "page-counts"
        ]  # fmt: skip
        counts[directory.name] = pages["spec"]["replicas"]
    assert counts == {"base": 2, "one-node": 1, "three-nodes": 3, "three-nodes-tls": 3}


def test_every_pod_runs_locked_down_probed_and_budgeted(rendered: list[dict[str, Any]]) -> None:
    tls = any(e["name"] == "MILLRACE_TLS_CA" for e in _containers(rendered)[0]["env"])
    for stateful in of_kind(rendered, "StatefulSet"):
        name = stateful["metadata"]["name"]
        pod = stateful["spec"]["template"]
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        [container] = pod["spec"]["containers"]
        guard = container["securityContext"]
        assert guard["readOnlyRootFilesystem"] is True
        assert guard["allowPrivilegeEscalation"] is False
        assert guard["capabilities"]["drop"] == ["ALL"]
        grpc_port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
        for probe in ("readinessProbe", "livenessProbe"):
            if tls:  # the kubelet's gRPC probe cannot speak TLS: `millrace health` does
                assert container[probe]["exec"]["command"] == TLS_PROBE, (name, probe)
            else:
                assert container[probe]["grpc"]["port"] == grpc_port, (name, probe)
        requests = container["resources"]["requests"]
        assert requests["cpu"] and requests["memory"]
        labels = stateful["spec"]["selector"]["matchLabels"]
        budgets = [
            b for b in of_kind(rendered, "PodDisruptionBudget")
            if b["spec"]["selector"]["matchLabels"] == labels
        ]  # fmt: skip
        assert len(budgets) == 1, f"{name}: one disruption budget"
        [service] = [
            s for s in of_kind(rendered, "Service")
            if s["metadata"]["name"] == stateful["spec"]["serviceName"]
        ]  # fmt: skip
        assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == labels
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/data", "/etc/millrace/config"} <= mounts
        env = {e["name"]: e.get("valueFrom", {}) for e in container["env"]}
        assert env["MILLRACE_TOKEN"]["secretKeyRef"]["name"] == "millrace-token"
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["config"]["configMap"]["name"] == _config_name(rendered), name


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s["spec"]["template"]["spec"]["containers"][0] for s in of_kind(docs, "StatefulSet")]


def _config_name(docs: list[dict[str, Any]]) -> str:
    [config] = [
        doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"].startswith(CONFIG)
    ]
    name: str = config["metadata"]["name"]
    return name


def test_the_deployment_file_places_every_process_on_a_pod_at_its_own_address(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    for name, text in config_files(rendered).items():
        (tmp_path / name).write_text(text)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MILLRACE_TOKEN", "a-token-for-the-test-only-0123456789abcdef")
        env.delenv("MILLRACE_TLS_CA", raising=False)
        deployment = Deployment.load(tmp_path / "deployment.toml")  # every interval placed once
    pods: dict[str, tuple[str, list[str]]] = {}  # pod name -> (its address, its args)
    for stateful in of_kind(rendered, "StatefulSet"):
        name = stateful["metadata"]["name"]
        [container] = stateful["spec"]["template"]["spec"]["containers"]
        port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
        for ordinal in range(stateful["spec"]["replicas"]):
            pod = f"{name}-{ordinal}"
            args = [a.replace("$(POD_NAME)", pod) for a in container["args"]]
            pods[pod] = (f"{pod}.{stateful['spec']['serviceName']}:{port}", args)
            values = {e["name"]: e.get("value") for e in container["env"]}
            health = values["MILLRACE_HEALTH_ADDRESS"]
            assert health is not None and health.replace("$(POD_NAME)", pod) == pods[pod][0]
    placed = {n: p.address for n, p in deployment.nodes.items()}
    node_pods = {pod for pod, (_, args) in pods.items() if args[0] == "node"}
    assert set(placed) == node_pods, "one placement per node pod, one pod per placement"
    for node, address in placed.items():
        assert pods[node][0] == address, node
        assert pods[node][1][:2] == ["node", "--deployment"]
    assert deployment.injector is not None and pods["injector-0"][0] == deployment.injector.address
    sinks = {args[args.index("--stream") + 1]: pod for pod, (_, args) in pods.items()
             if args[0] == "sink"}  # fmt: skip
    assert set(sinks) == set(deployment.sinks)
    for stream, pod in sinks.items():
        assert pods[pod][0] == deployment.sinks[stream], stream
    assert "security" not in tomllib.loads(config_files(rendered)["deployment.toml"])
    parser = build_parser()
    for _, args in pods.values():
        parser.parse_args(args)  # exits (SystemExit) on an option millrace does not take


def test_the_topology_is_the_demos_own() -> None:
    demo = Path(__file__).resolve().parent.parent / "examples" / "clickstream" / "topology.toml"
    assert (BASE / "topology.toml").read_text() == demo.read_text()


@pytest.mark.slow
def test_the_tls_probe_finds_a_real_tls_server_serving(tmp_path: Path) -> None:
    """The TLS overlay's injector pod run as the kubelet would run it (its args, its env
    with ``$(POD_NAME)`` expanded, its Secret's files at their mount path), its name
    ``injector-0.injector`` standing for localhost: the pod's probe command exits 0, and
    the kubelet's own (plaintext) gRPC probe would have failed."""
    rendered = kustomize(KUBERNETES / "overlays" / "three-nodes-tls")
    [injector] = [
        s for s in of_kind(rendered, "StatefulSet") if s["metadata"]["name"] == "injector"
    ]
    [container] = injector["spec"]["template"]["spec"]["containers"]
    port = free_port()
    here = f"localhost:{port}"
    mounts = {m["name"]: Path(m["mountPath"]) for m in container["volumeMounts"]}
    paths = {  # each mount path in the pod -> where the test put its files
        str(mounts["config"]): tmp_path / "config",
        str(mounts["tls"]): tmp_path / "tls",
        str(mounts["data"]): tmp_path / "data",
    }
    for directory in paths.values():
        directory.mkdir()
    for name, text in config_files(rendered).items():
        (paths[str(mounts["config"])] / name).write_text(
            text.replace("injector-0.injector:7000", here)
        )
    certs = make_certs(tmp_path / "certs", "DNS:*.injector,DNS:localhost")
    for source, target in (
        ("server.pem", "tls.crt"),
        ("server.key", "tls.key"),
        ("ca.pem", "ca.crt"),
    ):
        shutil.copy(certs / source, paths[str(mounts["tls"])] / target)

    def in_test(value: str) -> str:
        for pod_path, test_path in paths.items():
            value = value.replace(pod_path, str(test_path))
        return value.replace("injector-0.injector:7000", here)

    env = {k: v for k, v in os.environ.items() if not k.startswith("MILLRACE_")}
    env["PYTHONPATH"] = str(ROOT)
    for variable in container["env"]:
        if "value" in variable:
            env[variable["name"]] = in_test(variable["value"].replace("$(POD_NAME)", "injector-0"))
    env["MILLRACE_TOKEN"] = "a-token-for-the-test-only-0123456789abcdef"  # the Secret's
    args = [in_test(a) for a in container["args"]]
    log = tmp_path / "injector.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "millrace", *args],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith("injector serving"), log.read_text()
        probe = container["readinessProbe"]["exec"]["command"]
        assert probe[0] == "millrace"
        checked = subprocess.run(
            [sys.executable, "-m", "millrace", *probe[1:]],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip
        assert checked.returncode == 0 and checked.stdout.strip() == "SERVING", checked
        # What the kubelet's own gRPC probe does (plaintext): refused by the TLS server.
        with grpc.insecure_channel(here) as channel, pytest.raises(grpc.RpcError):
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
    finally:
        server.terminate()
        server.wait(timeout=30)
