"""The kustomize tree renders in every overlay (with `kubectl kustomize`), every object it renders is valid against
the Kubernetes schemas (kubernetes-validate), and every registered capability has its service, autoscaler and
disruption budget in every overlay and its pipeline in `pipelines/all.py`."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess

import pytest
import yaml

from jobaware import capabilities
from tests.conftest import ROOT

K8S = ROOT / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
KUBERNETES_VERSION = "1.30"  # the oldest minor the manifests are checked against


@functools.cache
def render(overlay: str) -> tuple[dict, ...]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        if os.environ.get("JOBAWARE_REQUIRE_KUSTOMIZE") == "1":
            pytest.fail("JOBAWARE_REQUIRE_KUSTOMIZE=1 but no kubectl (Debian package 'kubernetes-client')")
        pytest.skip("kubectl is not installed (Debian package 'kubernetes-client'); set JOBAWARE_REQUIRE_KUSTOMIZE=1 "
                    "to fail")
    result = subprocess.run([kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return tuple(d for d in yaml.safe_load_all(result.stdout) if d)


def objects(overlay: str, kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in render(overlay) if d["kind"] == kind}


def test_overlays_exist():
    assert {"local", "production"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(overlay):
    import kubernetes_validate

    for document in render(overlay):
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{overlay}: {document['kind']}/{document['metadata']['name']}: {exc.message} at "
                        f"{'.'.join(map(str, exc.path))}")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_capability_has_its_service_autoscaler_and_budget(overlay):
    deployments = objects(overlay, "Deployment")
    services = objects(overlay, "Service")
    autoscalers = objects(overlay, "HorizontalPodAutoscaler")
    budgets = objects(overlay, "PodDisruptionBudget")
    for key in capabilities.keys():
        name = f"jobaware-{key}"
        assert name in deployments, f"{overlay}: no Deployment {name} for the registered capability '{key}'"
        pod = deployments[name]["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["command"][:3] == ["jobaware", "serve", key]
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and "memory" in container["resources"]["limits"]
        labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert name in services and services[name]["spec"]["selector"].items() <= labels.items()
        assert autoscalers[name]["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                                               "name": name}
        assert autoscalers[name]["spec"]["minReplicas"] <= autoscalers[name]["spec"]["maxReplicas"]
        assert budgets[name]["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_card_gateway_reaches_every_service_it_asks_by_its_in_cluster_name(overlay):
    """The gateway (serving/card.py) finds each service by JOBAWARE_<KEY>_URL (jobaware.config.service_url): every
    registered capability's URL names that capability's Service and port."""
    [gateway] = objects(overlay, "Deployment")["jobaware-card"]["spec"]["template"]["spec"]["containers"]
    assert gateway["command"][:3] == ["bentoml", "serve", "serving.card:CardService"]
    env = {e["name"]: e["value"] for e in gateway["env"]}
    services = objects(overlay, "Service")
    for key in capabilities.keys():
        url = env[f"JOBAWARE_{key.upper()}_URL"]
        port = services[f"jobaware-{key}"]["spec"]["ports"][0]["port"]
        assert url == f"http://jobaware-{key}:{port}", f"{overlay}: the gateway asks {url} for {key}"
    assert {"jobaware-card"} <= set(objects(overlay, "HorizontalPodAutoscaler")) & set(objects(overlay, "PodDisruptionBudget"))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_runs_non_root_read_only_without_privileges(overlay):
    for name, deployment in objects(overlay, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001, name
        mounted = set()
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert container["image"].rsplit(":", 1)[0].endswith("/jobaware"), name
            mounted |= {m["mountPath"] for m in container.get("volumeMounts", [])}
            env = {e["name"]: e for e in container.get("env", [])}
            if "JOBAWARE_HOME" in env:
                assert env["JOBAWARE_HOME"]["value"] in mounted, f"{name}: JOBAWARE_HOME is not a volume"
        assert "/tmp" in mounted, f"{name}: /tmp is not a volume on a read-only root"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_are_only_referenced(overlay):
    assert not objects(overlay, "Secret"), f"{overlay}: a Secret is written into the manifests"
    [mlflow] = objects(overlay, "Deployment")["mlflow"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in mlflow["env"]}
    assert env["MLFLOW_DB_URI"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-db", "key": "uri"}


def test_every_capability_has_its_pipeline_in_all():
    from pipelines.all import Versions, all_pipeline

    parameters = inspect.signature(all_pipeline.pipeline_func).parameters
    for key in capabilities.keys():
        assert f"{key}_data" in parameters, f"pipelines/all.py takes no data for the registered capability '{key}'"
        assert key in Versions._fields, f"pipelines/all.py returns no version for '{key}'"


def test_the_committed_manifests_are_what_the_registry_renders():
    """Each capability's service, the base's list of them, the gateway's URLs and the overlays' patches are rendered
    from the registry (`python -m jobaware.manifests`): a capability joins by registering, and the files it adds
    are generated."""
    from jobaware import manifests

    assert not manifests.differing(K8S), "run `python -m jobaware.manifests` and review the diff"
    for key in capabilities.keys():
        assert f"base/{key}.yaml" in manifests.rendered()
