"""The kustomize tree renders in every overlay (with `kubectl kustomize`), every object it renders is valid against
the Kubernetes schemas (kubernetes-validate), and every registered capability has its service, autoscaler and
disruption budget in every overlay and its pipeline in `pipelines/all.py`. On the rendered objects: who may reach
each Deployment, computed from the NetworkPolicies, is what the design says; MLflow requires a user and answers to its
Service's names; the services read MLflow as a read-only user and hold the service token; every image, Secret, host
and namespace named is one k8s/site.yaml lists and k8s/README.md tells a site how to provide. No cluster runs here:
what a cluster would do with them (a network plugin enforcing the policies, an ingress controller) is not tested."""

from __future__ import annotations

import configparser
import functools
import inspect
import os
import re
import shutil
import subprocess
import urllib.parse
from dataclasses import dataclass

import pytest
import yaml

import jobaware
from jobaware import capabilities
from tests.conftest import ROOT

K8S = ROOT / "jobaware" / "k8s"
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
    assert gateway["command"][:3] == ["bentoml", "serve", "jobaware.serving.card:CardService"]
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
    from jobaware.pipelines.all import Versions, all_pipeline

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


# ---------------------------------------------------------------- who may reach what (NetworkPolicies)

def selects(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a set of labels; `{}` selects all."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if not {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]:
            return False
    return True


@dataclass(frozen=True)
class Pod:
    """A pod as NetworkPolicies see it: its namespace (with the label the API server gives every namespace) and
    its own labels."""

    name: str
    namespace: str
    labels: tuple

    def matches(self, peer: dict, policy_namespace: str) -> bool:
        """Whether a policy's peer (`from`/`to` entry) names this pod; ipBlock peers name addresses outside."""
        if "ipBlock" in peer:
            return False
        if "namespaceSelector" in peer:
            in_namespace = selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": self.namespace})
        else:
            in_namespace = self.namespace == policy_namespace
        return in_namespace and selects(peer.get("podSelector") or {}, dict(self.labels))


def policy_types(policy: dict) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def admitted(policies: list[dict], subject: Pod, direction: str, peer: Pod | None, port: int, protocol: str) -> bool:
    """Whether the policies let `subject` take (Ingress) or make (Egress) a connection with `peer` (None: an address
    outside the cluster) on the port: allowed when no policy selects the subject for the direction, else when a rule
    of one that does admits both the peer and the port."""
    selecting = [p for p in policies if p["metadata"]["namespace"] == subject.namespace
                 and direction in policy_types(p) and selects(p["spec"]["podSelector"], dict(subject.labels))]
    if not selecting:
        return True
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(rules_key) or []:
            ports = rule.get("ports")
            if ports and not any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports):
                continue
            peers = rule.get(peers_key)
            if not peers or any(("ipBlock" in q) if peer is None else peer.matches(q, policy["metadata"]["namespace"])
                                for q in peers):
                return True
    return False


def reachable(policies: list[dict], source: Pod, target: Pod, port: int, protocol: str = "TCP") -> bool:
    return (admitted(policies, source, "Egress", target, port, protocol)
            and admitted(policies, target, "Ingress", source, port, protocol))


def golden_pipeline_step_labels() -> dict:
    """The labels Kubeflow Pipelines puts on the pods of the steps that talk to MLflow, from the compiled pipeline."""
    _, platform = yaml.safe_load_all((ROOT / "jobaware" / "pipelines" / "golden" / "failure.yaml").read_text())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    labels = [e.get("podMetadata", {}).get("labels", {}) for e in executors.values() if "secretAsEnv" in e]
    assert labels and all(x == labels[0] for x in labels)
    return labels[0]


def pods(overlay: str) -> dict[str, Pod]:
    """Every pod the overlay runs (one per Deployment and Job), the pipelines' MLflow steps in `kubeflow`, the
    ingress controller, and pods that must reach nothing: a pod started by hand in the namespace, another pipeline's
    step in `kubeflow`, a pod of another namespace, the cluster DNS."""
    found = {}
    for kind in ("Deployment", "Job"):
        for name, workload in objects(overlay, kind).items():
            labels = workload["spec"]["template"]["metadata"]["labels"]
            found[name] = Pod(name, workload["metadata"]["namespace"], tuple(sorted(labels.items())))
    outsiders = {
        "pipeline-step": ("kubeflow", golden_pipeline_step_labels()),
        "ingress-controller": ("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx",
                                                 "app.kubernetes.io/component": "controller"}),
        "debug-in-namespace": ("jobaware", {"run": "debug"}),
        "other-pipeline-step": ("kubeflow", {"jobaware.pipelines.kubeflow.org/v2_component": "true"}),
        "other-namespace": ("default", {"app.kubernetes.io/part-of": "jobaware", "app.kubernetes.io/component": "service"}),
        "dns": ("kube-system", {"k8s-app": "kube-dns"}),
        "prometheus": ("monitoring", {"app.kubernetes.io/name": "prometheus"}),
        "other-monitoring-pod": ("monitoring", {"app.kubernetes.io/name": "grafana"}),
    }
    found |= {name: Pod(name, namespace, tuple(sorted(labels.items()))) for name, (namespace, labels) in outsiders.items()}
    return found


def served_port(overlay: str, name: str) -> int:
    [port] = objects(overlay, "Service")[name]["spec"]["ports"]
    return port["port"]


def expected_sources(overlay: str, name: str) -> set[str]:
    """Who the design lets reach each Deployment (k8s/base/networkpolicies.yaml's head, k8s/README.md)."""
    services = {f"jobaware-{key}" for key in capabilities.keys()}
    outside = {"ingress-controller"} if overlay == "production" else set()
    if name == "mlflow":
        return services | {"mlflow-access", "pipeline-step"}
    if name in services:
        return {"jobaware-card", "prometheus"} | outside
    assert name == "jobaware-card", f"{overlay}: the design says nothing of who reaches the Deployment {name}"
    return {"prometheus"} | outside


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_deployment_is_reached_by_exactly_whom_the_design_says(overlay):
    """Computed from the rendered NetworkPolicies (their selectors matched against every pod's labels and namespace),
    not read from them: a selector that kustomize's commonLabels narrowed, or a label a pod lost, shows here."""
    policies = list(objects(overlay, "NetworkPolicy").values())
    everyone = pods(overlay)
    for name in objects(overlay, "Deployment"):
        target, port = everyone[name], served_port(overlay, name)
        sources = {s for s, pod in everyone.items() if s != name and reachable(policies, pod, target, port)}
        assert sources == expected_sources(overlay, name), f"{overlay}: {name} is reached by {sorted(sources)}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_egress_is_the_cluster_dns_for_all_and_the_database_port_for_mlflow_alone(overlay):
    policies = list(objects(overlay, "NetworkPolicy").values())
    everyone = pods(overlay)
    for name, pod in everyone.items():
        if pod.namespace != "jobaware":
            continue
        assert reachable(policies, pod, everyone["dns"], 53, "UDP"), f"{overlay}: {name} cannot ask the DNS"
        outside = {port for port in (22, 53, 80, 443, 3000, 5000, 5432, 6379, 9092)
                   if admitted(policies, pod, "Egress", None, port, "TCP")}
        assert outside == ({5432} if name == "mlflow" else set()), f"{overlay}: {name} may leave the cluster on {outside}"
    assert not reachable(policies, everyone["jobaware-card"], everyone["mlflow"], 5000)  # the gateway holds no model
    assert not reachable(policies, everyone["jobaware-failure"], everyone["jobaware-hold"], 3000)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_scrapes_every_service_and_the_gateway_at_the_port_and_path_their_pods_announce(overlay):
    """The pods' prometheus.io annotations name their own port and /metrics; the PodMonitor (k8s/monitoring, for the
    Prometheus Operator) selects exactly the services' and the gateway's pods, by their port's name, and names each
    target's job after the pod (jobaware-..., which the alert rules' `up{job=~"jobaware.*"}` reads)."""
    monitor = yaml.safe_load((K8S / "monitoring" / "podmonitor.yaml").read_text())
    assert monitor["kind"] == "PodMonitor" and monitor["metadata"]["namespace"] == "jobaware"
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    scraped = set()
    for name, workload in objects(overlay, "Deployment").items():
        template = workload["spec"]["template"]
        labels = template["metadata"]["labels"]
        if not selects(monitor["spec"]["selector"], labels):
            assert "prometheus.io/scrape" not in (template["metadata"].get("annotations") or {}), name
            continue
        scraped.add(name)
        [container] = template["spec"]["containers"]
        [port] = container["ports"]
        annotations = template["metadata"]["annotations"]
        assert (port["name"], endpoint["port"]) == ("http", "http") and endpoint["path"] == "/metrics"
        assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics",
                               "prometheus.io/port": str(port["containerPort"])}
        assert labels[monitor["spec"]["jobLabel"]] == name and name.startswith("jobaware")
    assert scraped == {f"jobaware-{key}" for key in capabilities.keys()} | {"jobaware-card"}


def test_the_policy_evaluator_matches_what_kubernetes_documents():
    """The evaluator itself, on the cases of the NetworkPolicy documentation: namespace and pod selector in one peer
    (AND) against two peers (OR), an empty selector, no policy at all, and an expression."""
    web = Pod("web", "prod", (("app", "web"),))
    client_same = Pod("c1", "prod", (("role", "client"),))
    client_other = Pod("c2", "dev", (("role", "client"),))
    anyone_other = Pod("c3", "dev", ())
    allow = {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}
    both = {"metadata": {"namespace": "prod"}, "spec": {**allow, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dev"}},
         "podSelector": {"matchLabels": {"role": "client"}}}]}]}}
    either = {"metadata": {"namespace": "prod"}, "spec": {**allow, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dev"}}},
        {"podSelector": {"matchLabels": {"role": "client"}}}]}]}}
    assert [reachable([both], p, web, 80) for p in (client_same, client_other, anyone_other)] == [False, True, False]
    assert [reachable([either], p, web, 80) for p in (client_same, client_other, anyone_other)] == [True, True, True]
    deny = {"metadata": {"namespace": "prod"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    assert not reachable([deny], client_same, web, 80) and reachable([], client_same, web, 80)
    ported = {"metadata": {"namespace": "prod"}, "spec": {**allow, "ingress": [{"ports": [{"port": 443}]}]}}
    assert reachable([ported], anyone_other, web, 443) and not reachable([ported], anyone_other, web, 80)
    assert selects({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, {"app": "web"})
    assert not selects({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {"app": "web"})


# ---------------------------------------------------------------- MLflow's authentication and hosts

def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def secret_of(entry: dict) -> tuple[str, str]:
    ref = entry["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_mlflow_requires_a_user_and_answers_to_its_service_names(overlay):
    [mlflow] = objects(overlay, "Deployment")["mlflow"]["spec"]["template"]["spec"]["containers"]
    command = mlflow["command"]
    assert command[:4] == ["mlflow", "server", "--app-name", "basic-auth"]
    namespace = objects(overlay, "Deployment")["mlflow"]["metadata"]["namespace"]
    port = served_port(overlay, "mlflow")
    allowed = set(command[command.index("--allowed-hosts") + 1].split(","))
    names = {"mlflow", f"mlflow.{namespace}", f"mlflow.{namespace}.svc", f"mlflow.{namespace}.svc.cluster.local"}
    assert allowed == {f"{name}:{port}" for name in names} | {f"localhost:{port}"}
    env = env_of(mlflow)
    assert secret_of(env["MLFLOW_AUTH_ADMIN_PASSWORD"]) == ("mlflow-auth", "admin_password")
    assert secret_of(env["MLFLOW_FLASK_SERVER_SECRET_KEY"]) == ("mlflow-auth", "flask_secret_key")
    ini = configparser.ConfigParser()
    ini.read_string(objects(overlay, "ConfigMap")["mlflow-auth-config"]["data"]["basic_auth.ini"])
    assert ini["mlflow"]["default_permission"] == "NO_PERMISSIONS"
    mounts = {m["mountPath"]: m["name"] for m in mlflow["volumeMounts"]}
    assert os.path.dirname(env["MLFLOW_AUTH_CONFIG_PATH"]["value"]) in mounts
    database = ini["mlflow"]["database_uri"].removeprefix("sqlite:///")
    artifacts = command[command.index("--artifacts-destination") + 1]
    assert os.path.dirname(database) in mounts and not database.startswith(artifacts + "/"), (
        "the user database must be on the volume, and not among the artifacts the server hands out")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_read_mlflow_as_the_read_only_user_and_hold_the_service_token(overlay):
    deployments = objects(overlay, "Deployment")
    admin = {"mlflow-auth"}
    for name in [f"jobaware-{key}" for key in capabilities.keys()] + ["jobaware-card"]:
        pod = deployments[name]["spec"]["template"]["spec"]
        [container] = pod["containers"]
        env = env_of(container)
        secrets = {secret_of(e)[0] for e in env.values() if "valueFrom" in e}
        assert not secrets & admin, f"{overlay}: {name} holds MLflow's admin password"
        if name != "jobaware-card":
            assert env["MLFLOW_TRACKING_URI"]["value"] == f"http://mlflow:{served_port(overlay, 'mlflow')}"
            assert secret_of(env["MLFLOW_TRACKING_USERNAME"]) == ("mlflow-reader", "username")
            assert secret_of(env["MLFLOW_TRACKING_PASSWORD"]) == ("mlflow-reader", "password")
        else:
            assert "MLFLOW_TRACKING_PASSWORD" not in env, "the gateway holds no model and no MLflow user"
        token = env["JOBAWARE_SERVICE_TOKEN_FILE"]["value"]
        [mount] = [m for m in container["volumeMounts"] if token.startswith(m["mountPath"] + "/")]
        assert mount.get("readOnly") is True
        [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == "jobaware-service-token"
        assert volume["secret"]["defaultMode"] & 0o007 == 0, f"{overlay}: {name}: the token is readable by others"
        assert {i["path"]: i["key"] for i in volume["secret"]["items"]} == {
            os.path.relpath(token, mount["mountPath"]): "token"}
    [job] = objects(overlay, "Job")["mlflow-access"]["spec"]["template"]["spec"]["containers"]
    env = env_of(job)
    assert job["command"] == ["python3", "-m", "jobaware.mlflow_access"]
    assert secret_of(env["JOBAWARE_MLFLOW_READER_PASSWORD"]) == ("mlflow-reader", "password")
    assert secret_of(env["MLFLOW_TRACKING_PASSWORD"]) == ("mlflow-auth", "admin_password")


# ---------------------------------------------------------------- what a site provides

SITE = yaml.safe_load((K8S / "site.yaml").read_text())
README = (K8S / "README.md").read_text()


def named_secrets(overlay: str) -> dict[str, set[str]]:
    """Every Secret the rendered overlay names, with the keys it reads: env references, secret volumes, the Ingress's
    TLS secret and its basic-authentication secret."""
    named: dict[str, set[str]] = {}
    for kind in ("Deployment", "Job"):
        for workload in objects(overlay, kind).values():
            pod = workload["spec"]["template"]["spec"]
            for container in pod["containers"]:
                for entry in container.get("env", []):
                    if "secretKeyRef" in entry.get("valueFrom", {}):
                        name, key = secret_of(entry)
                        named.setdefault(name, set()).add(key)
                assert not container.get("envFrom"), "a whole Secret or ConfigMap as environment says no keys"
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    keys = {i["key"] for i in volume["secret"].get("items", [])}
                    assert keys, f"{overlay}: the secret volume {volume['name']} names no keys"
                    named.setdefault(volume["secret"]["secretName"], set()).update(keys)
    for ingress in objects(overlay, "Ingress").values():
        for tls in ingress["spec"].get("tls", []):
            named.setdefault(tls["secretName"], set()).update({"tls.crt", "tls.key"})
        auth = ingress["metadata"].get("annotations", {}).get("nginx.ingress.kubernetes.io/auth-secret")
        if auth:
            named.setdefault(auth, set()).add("auth")
    return named


def pipeline_secrets() -> dict[str, set[str]]:
    named: dict[str, set[str]] = {}
    for golden in (ROOT / "jobaware" / "pipelines" / "golden").glob("*.yaml"):
        _, platform = yaml.safe_load_all(golden.read_text())
        for executor in platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values():
            for secret in executor.get("secretAsEnv", []):
                named.setdefault(secret["secretName"], set()).update(k["secretKey"] for k in secret["keyToEnv"])
    return named


def site_secrets(overlay: str | None) -> dict[str, set[str]]:
    return {name: set(s["keys"]) for name, s in SITE["secrets"].items()
            if (overlay is None and s.get("pipelines")) or
            (overlay is not None and not s.get("pipelines") and overlay in s.get("overlays", OVERLAYS))}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_secret_image_and_host_the_manifests_name_is_one_the_docs_tell_a_site_to_provide(overlay):
    assert named_secrets(overlay) == site_secrets(overlay)
    images = {c["image"] for kind in ("Deployment", "Job") for w in objects(overlay, kind).values()
              for c in w["spec"]["template"]["spec"]["containers"]}
    assert images == {SITE["images"][overlay]}, f"{overlay}: the pods run {images}; one image, from one setting"
    assert SITE["images"][overlay].endswith(f":{jobaware.__version__}")
    hosts = {h for i in objects(overlay, "Ingress").values() for h in
             [r["host"] for r in i["spec"]["rules"]] + [h for t in i["spec"].get("tls", []) for h in t["hosts"]]}
    assert hosts == {h for h, s in SITE["hosts"].items() if overlay in s["overlays"]}
    namespaces = {d["metadata"].get("namespace") for d in render(overlay) if d["kind"] != "Namespace"}
    for policy in objects(overlay, "NetworkPolicy").values():
        for rule in policy["spec"].get("ingress", []) + policy["spec"].get("egress", []):
            for peer in rule.get("from", []) + rule.get("to", []):
                namespaces |= set((peer.get("namespaceSelector") or {}).get("matchLabels", {}).values())
    assert namespaces <= set(SITE["namespaces"]), f"{overlay}: names namespaces {namespaces - set(SITE['namespaces'])}"
    for pod in (p for kind in ("Deployment", "Job") for w in objects(overlay, kind).values()
                for p in [w["spec"]["template"]["spec"]]):
        for container in pod["containers"]:
            for entry in container.get("env", []):
                url = urllib.parse.urlsplit(entry.get("value") or "")
                if url.scheme in ("http", "https"):  # an in-cluster name: one of the overlay's Services, on its port
                    assert url.port == served_port(overlay, url.hostname), f"{overlay}: {entry['name']}={url.geturl()}"


def test_the_pipelines_secret_is_one_the_docs_tell_a_site_to_provide():
    assert pipeline_secrets() == site_secrets(None)


def test_the_readme_tells_a_site_how_to_provide_each():
    """k8s/README.md has a command that creates each Secret in its namespace with each of its keys, and names each
    image, host and namespace."""
    commands = [line for line in README.splitlines() if "create secret" in line or line.startswith("  --from")]
    text = " ".join(README.split())
    for name, secret in SITE["secrets"].items():
        block = re.search(rf"kubectl -n {secret['namespace']} create secret (generic|tls) {name} (.*?)(?:\n\n|```)",
                          README, re.S)
        assert block, f"k8s/README.md: no `kubectl -n {secret['namespace']} create secret ... {name}`"
        for key in secret["keys"]:
            assert (block.group(1) == "tls" and key in ("tls.crt", "tls.key")) or f"--from-literal={key}=" in block.group(
                2) or f"--from-file={key}=" in block.group(2), f"k8s/README.md: {name} is created without its key {key}"
    assert commands
    for value in [*SITE["images"].values(), *SITE["hosts"], *SITE["namespaces"]]:
        assert value in text, f"k8s/README.md does not name {value}"
    for host, where in SITE["hosts"].items():
        assert (K8S / where["set_in"]).is_file() and host in (K8S / where["set_in"]).read_text()
