"""``deploy/kubernetes/`` (issue 33), checked offline: every manifest against the
Kubernetes API schemas (kubernetes-validate, strict: no unknown field), the pods as
the docs promise them (non-root, read-only root filesystem, gRPC health probes,
requests, Prometheus annotations, a disruption budget, a headless service), and the
deployment file in the ConfigMap against the StatefulSets: every placement is a pod
of theirs at its own address, every container's command is one ``millrace`` takes."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from millrace.cli import build_parser
from millrace.deployment import Placement

MANIFESTS = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
KUBERNETES = "1.33"


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return found


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents() if doc["kind"] == kind]


def config_files() -> dict[str, str]:
    [config] = [doc for doc in of_kind("ConfigMap") if doc["metadata"]["name"] == "millrace-config"]
    files: dict[str, str] = config["data"]
    return files


@pytest.mark.parametrize(
    "doc", [d for d in documents() if d["kind"] != "Kustomization"], ids=lambda d: d["kind"]
)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_kustomization_lists_every_manifest() -> None:
    [kustomization] = of_kind("Kustomization")
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("stateful", of_kind("StatefulSet"), ids=lambda d: d["metadata"]["name"])
def test_every_pod_runs_locked_down_probed_and_budgeted(stateful: dict[str, Any]) -> None:
    name = stateful["metadata"]["name"]
    pod = stateful["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    [container] = pod["spec"]["containers"]
    guard = container["securityContext"]
    assert guard["readOnlyRootFilesystem"] is True and guard["allowPrivilegeEscalation"] is False
    assert guard["capabilities"]["drop"] == ["ALL"]
    grpc_port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == grpc_port, probe
    assert (
        container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    )
    labels = stateful["spec"]["selector"]["matchLabels"]
    budgets = [
        b for b in of_kind("PodDisruptionBudget") if b["spec"]["selector"]["matchLabels"] == labels
    ]
    assert len(budgets) == 1, f"{name}: one disruption budget"
    [service] = [
        s for s in of_kind("Service") if s["metadata"]["name"] == stateful["spec"]["serviceName"]
    ]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == labels
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/data", "/etc/millrace/config"} <= mounts
    env = {e["name"]: e.get("valueFrom", {}) for e in container["env"]}
    assert env["MILLRACE_TOKEN"]["secretKeyRef"]["name"] == "millrace-token"


def test_the_deployment_file_places_every_process_on_a_pod_at_its_own_address(
    tmp_path: Path,
) -> None:
    for name, text in config_files().items():
        (tmp_path / name).write_text(text)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MILLRACE_TOKEN", "a-token-for-the-test-only-0123456789abcdef")
        deployment = Placement.load(tmp_path / "deployment.toml")  # addresses, no user code
    pods: dict[str, tuple[str, list[str]]] = {}  # pod name -> (its address, its args)
    for stateful in of_kind("StatefulSet"):
        name = stateful["metadata"]["name"]
        [container] = stateful["spec"]["template"]["spec"]["containers"]
        port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
        for ordinal in range(stateful["spec"]["replicas"]):
            pod = f"{name}-{ordinal}"
            args = [a.replace("$(POD_NAME)", pod) for a in container["args"]]
            pods[pod] = (f"{pod}.{stateful['spec']['serviceName']}:{port}", args)
    placed = {**{n: p.address for n, p in deployment.nodes.items()}}
    assert set(placed) | {"injector-0"} <= set(pods)
    for node, address in placed.items():
        assert pods[node][0] == address, node
        assert pods[node][1][:2] == ["node", "--deployment"]
    assert deployment.injector is not None and pods["injector-0"][0] == deployment.injector.address
    sinks = {args[args.index("--stream") + 1]: pod for pod, (_, args) in pods.items()
             if args[0] == "sink"}  # fmt: skip
    assert set(sinks) == set(deployment.sinks)
    for stream, pod in sinks.items():
        assert pods[pod][0] == deployment.sinks[stream], stream
    assert "security" not in tomllib.loads(config_files()["deployment.toml"]), "MILLRACE_TOKEN"
    parser = build_parser()
    for _, args in pods.values():
        parser.parse_args(args)  # exits (SystemExit) on an option millrace does not take


def test_the_topology_is_the_demos_own() -> None:
    demo = Path(__file__).resolve().parent.parent / "examples" / "clickstream" / "topology.toml"
    ours = config_files()["topology.toml"].split("\n", 1)[1]
    assert ours == demo.read_text()
