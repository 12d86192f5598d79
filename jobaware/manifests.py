"""The Kubernetes manifests that follow from the registry, rendered (`python -m jobaware.manifests` writes them under
`k8s/`; `--check` says which differ): each capability's service (Deployment, Service, HorizontalPodAutoscaler,
PodDisruptionBudget) in `k8s/base/<key>.yaml`, the base's list of them, the job-card gateway with every service's
in-cluster URL, each overlay's patches of the services (`k8s/overlays/<overlay>/services.yaml`), the production
Ingress with a path per service (`k8s/overlays/production/ingress.yaml`), and the Prometheus Operator's PodMonitor
of the services and the gateway (`k8s/monitoring/podmonitor.yaml`). A capability joins the manifests by
registering; `tests/test_k8s.py` holds the committed files equal to what this renders."""

from __future__ import annotations

import sys
from pathlib import Path

from jobaware import capabilities
from jobaware.packaged import bundled

PORT = 3000
# The shared service token (the Secret `jobaware-service-token`, key `token`): mounted read-only at one fixed path in
# every service and the gateway, which read it from JOBAWARE_SERVICE_TOKEN_FILE.
TOKEN_DIR = "/var/run/secrets/jobaware"
TOKEN_FILE = f"{TOKEN_DIR}/service-token"
TOKEN_VOLUME = """\
        - name: service-token
          secret: {secretName: jobaware-service-token, defaultMode: 288, items: [{key: token, path: service-token}]}
"""  # 288 is 0440: read by the pod's user and group (fsGroup), no one else
INGRESS_HOST = "jobaware.example.org"  # a placeholder: a site sets its own in overlays/production/ingress-host.yaml
GENERATED = "# Generated from the capability registry by `python -m jobaware.manifests`: do not edit by hand.\n"

SERVICE = """\
# The {key} service ({question}): serves models:/jobaware-{key}@champion and follows promotions without restart.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: jobaware-{key}
  labels: {{app.kubernetes.io/name: jobaware-{key}, app.kubernetes.io/component: service, app.kubernetes.io/part-of: jobaware}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app.kubernetes.io/name: jobaware-{key}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: jobaware-{key}, app.kubernetes.io/component: service, app.kubernetes.io/part-of: jobaware}}
      annotations: {{prometheus.io/scrape: "true", prometheus.io/path: /metrics, prometheus.io/port: "{port}"}}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        fsGroup: 10001
        seccompProfile: {{type: RuntimeDefault}}
      containers:
        - name: service
          image: jobaware
          command: ["jobaware", "serve", "{key}", "--host", "0.0.0.0", "--port", "{port}"]
          env:
            - {{name: MLFLOW_TRACKING_URI, value: "http://mlflow:5000"}}
            - name: MLFLOW_TRACKING_USERNAME
              valueFrom: {{secretKeyRef: {{name: mlflow-reader, key: username}}}}
            - name: MLFLOW_TRACKING_PASSWORD
              valueFrom: {{secretKeyRef: {{name: mlflow-reader, key: password}}}}
            - {{name: JOBAWARE_SERVICE_TOKEN_FILE, value: {token_file}}}
            - {{name: JOBAWARE_HOME, value: /home/jobaware/.jobaware}}
          ports: [{{containerPort: {port}, name: http}}]
          startupProbe: {{httpGet: {{path: /livez, port: http}}, periodSeconds: 5, failureThreshold: 60}}
          livenessProbe: {{httpGet: {{path: /livez, port: http}}, periodSeconds: 20, timeoutSeconds: 5}}
          readinessProbe: {{httpGet: {{path: /readyz, port: http}}, periodSeconds: 10, timeoutSeconds: 5}}
          resources:
            requests: {{cpu: 500m, memory: {memory_request}}}
            limits: {{cpu: "2", memory: {memory_limit}}}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {{drop: [ALL]}}
          volumeMounts:
            - {{name: home, mountPath: /home/jobaware/.jobaware}}
            - {{name: tmp, mountPath: /tmp}}
            - {{name: service-token, mountPath: {token_dir}, readOnly: true}}
      volumes:
        - {{name: home, emptyDir: {{sizeLimit: 2Gi}}}}
        - {{name: tmp, emptyDir: {{sizeLimit: 1Gi}}}}
{token_volume}---
apiVersion: v1
kind: Service
metadata:
  name: jobaware-{key}
  labels: {{app.kubernetes.io/name: jobaware-{key}, app.kubernetes.io/part-of: jobaware}}
spec:
  selector: {{app.kubernetes.io/name: jobaware-{key}}}
  ports: [{{name: http, port: {port}, targetPort: http}}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: jobaware-{key}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: jobaware-{key}}}
  minReplicas: 2
  maxReplicas: 6
  metrics:
    - type: Resource
      resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 70}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: jobaware-{key}
spec:
  minAvailable: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: jobaware-{key}}}
"""

GATEWAY = """\
# The job-card gateway (serving/card.py): one answer per job from the registered capabilities' services, part by
# part. It holds no model; each part it cannot get says why, so it needs only the services' in-cluster URLs.
# The scheduler-side adapters (jobaware slurm collect|adapt, jobaware hold follow) are not Deployments: they need
# the scheduler's own client tools and credentials (squeue/sacct/scontrol with munge, the schedd's event logs), so
# they run on the scheduler's hosts and reach these services and the job store over the network.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: jobaware-card
  labels: {{app.kubernetes.io/name: jobaware-card, app.kubernetes.io/component: gateway, app.kubernetes.io/part-of: jobaware}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app.kubernetes.io/name: jobaware-card}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: jobaware-card, app.kubernetes.io/component: gateway, app.kubernetes.io/part-of: jobaware}}
      annotations: {{prometheus.io/scrape: "true", prometheus.io/path: /metrics, prometheus.io/port: "{port}"}}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        fsGroup: 10001
        seccompProfile: {{type: RuntimeDefault}}
      containers:
        - name: gateway
          image: jobaware
          command: ["bentoml", "serve", "jobaware.serving.card:CardService", "--host", "0.0.0.0", "--port", "{port}"]
          env:
{urls}            - {{name: JOBAWARE_SERVICE_TOKEN_FILE, value: {token_file}}}
            - {{name: JOBAWARE_HOME, value: /home/jobaware/.jobaware}}
          ports: [{{containerPort: {port}, name: http}}]
          startupProbe: {{httpGet: {{path: /livez, port: http}}, periodSeconds: 5, failureThreshold: 24}}
          livenessProbe: {{httpGet: {{path: /livez, port: http}}, periodSeconds: 20, timeoutSeconds: 5}}
          readinessProbe: {{httpGet: {{path: /readyz, port: http}}, periodSeconds: 10, timeoutSeconds: 5}}
          resources:
            requests: {{cpu: 100m, memory: 384Mi}}
            limits: {{cpu: "1", memory: 1Gi}}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {{drop: [ALL]}}
          volumeMounts:
            - {{name: home, mountPath: /home/jobaware/.jobaware}}
            - {{name: tmp, mountPath: /tmp}}
            - {{name: service-token, mountPath: {token_dir}, readOnly: true}}
      volumes:
        - {{name: home, emptyDir: {{sizeLimit: 256Mi}}}}
        - {{name: tmp, emptyDir: {{sizeLimit: 256Mi}}}}
{token_volume}---
apiVersion: v1
kind: Service
metadata:
  name: jobaware-card
  labels: {{app.kubernetes.io/name: jobaware-card, app.kubernetes.io/part-of: jobaware}}
spec:
  selector: {{app.kubernetes.io/name: jobaware-card}}
  ports: [{{name: http, port: {port}, targetPort: http}}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: jobaware-card
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: jobaware-card}}
  minReplicas: 2
  maxReplicas: 4
  metrics:
    - type: Resource
      resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 70}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: jobaware-card
spec:
  minAvailable: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: jobaware-card}}
"""

MONITOR = """\
# For a Prometheus run by the Prometheus Operator (its CRDs installed; not part of the overlays): every service's and
# the gateway's /metrics, each target's job named after its pod's app.kubernetes.io/name (jobaware-failure, ...,
# jobaware-card), as jobaware's alert rules expect. base/networkpolicies.yaml lets Prometheus's pods in.
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: jobaware
  namespace: jobaware
  labels: {app.kubernetes.io/name: jobaware, app.kubernetes.io/part-of: jobaware}
spec:
  jobLabel: app.kubernetes.io/name
  selector:
    matchExpressions:
      - {key: app.kubernetes.io/component, operator: In, values: [service, gateway]}
  podMetricsEndpoints:
    - {port: http, path: /metrics, interval: 30s}
"""

KUSTOMIZATION = """\
# The whole platform in one namespace: the MLflow server (with authentication) and the Job that gives the services
# their read-only MLflow user, one service per registered capability and the job-card gateway (each a Deployment,
# Service, HorizontalPodAutoscaler, PodDisruptionBudget), and the NetworkPolicies that say who reaches what.
# Secrets are only referenced, never written here: k8s/README.md says how a site creates each one.
# The image is named `jobaware` here; each overlay says which image that is, in one `images:` entry.
# Written for kustomize v2.0 (Debian's kubectl 1.20) up to v5: `bases`, `patchesStrategicMerge`.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: jobaware
commonLabels:
  app.kubernetes.io/part-of: jobaware
resources:
  - namespace.yaml
  - mlflow.yaml
{services}  - card.yaml
  - networkpolicies.yaml
"""

INGRESS = """\
# The way in for the scheduler-side adapters, which run outside the cluster (on the login, controller or schedd
# hosts): one host over TLS (the Secret `jobaware-tls`), HTTP basic authentication at the ingress controller (the
# Secret `jobaware-ingress-auth`, an htpasswd file under the key `auth`), one path per service: the adapters set
# JOBAWARE_<KEY>_URL=https://USER:PASSWORD@HOST/<key> (in the 0640 credentials file, never in jobaware.env), the
# card gateway is HOST/card. Written for ingress-nginx (its annotations); the host is set in ingress-host.yaml.
# networkpolicy-ingress.yaml lets the controller's pods, and nothing else outside, reach the services.
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: jobaware
  labels: {{app.kubernetes.io/name: jobaware, app.kubernetes.io/part-of: jobaware}}
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$2
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: jobaware-ingress-auth
    nginx.ingress.kubernetes.io/auth-realm: jobaware
    nginx.ingress.kubernetes.io/force-ssl-redirect: "true"
    nginx.ingress.kubernetes.io/proxy-body-size: 16m
spec:
  ingressClassName: nginx
  tls:
    - hosts: [{host}]
      secretName: jobaware-tls
  rules:
    - host: {host}
      http:
        paths:
{paths}"""

INGRESS_PATH = """\
          - path: /{key}(/|$)(.*)
            pathType: ImplementationSpecific
            backend: {{service: {{name: jobaware-{key}, port: {{name: http}}}}}}
"""

# Each overlay's patch of one capability's service (the overlay's hand-written patches hold the rest).
OVERLAYS = {
    "local": ("# A laptop cluster: one replica of each service, the image pulled never (loaded into the cluster).\n", """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: jobaware-{key}}}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: service
          imagePullPolicy: Never
          resources:
            requests: {{cpu: 100m, memory: 512Mi}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: jobaware-{key}}}
spec: {{minReplicas: 1, maxReplicas: 2}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: jobaware-{key}}}
spec: {{minAvailable: 0}}
"""),
    "production": ("# Production: each service spread over nodes, at least two always up, room to scale under load.\n", """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: jobaware-{key}}}
spec:
  replicas: 3
  template:
    spec:
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels: {{app.kubernetes.io/name: jobaware-{key}}}
      containers:
        - name: service
          imagePullPolicy: IfNotPresent
          resources:
            requests: {{cpu: "1"}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: jobaware-{key}}}
spec: {{minReplicas: 3, maxReplicas: 12}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: jobaware-{key}}}
spec: {{minAvailable: 2}}
"""),
}


def rendered() -> dict[str, str]:
    """Every generated file's text, by its path under `k8s/`."""
    registry = capabilities.registry()
    token = {"token_dir": TOKEN_DIR, "token_file": TOKEN_FILE, "token_volume": TOKEN_VOLUME}
    files = {f"base/{key}.yaml": GENERATED + SERVICE.format(
        key=key, question=capability.question, port=PORT, memory_request=capability.service_memory[0],
        memory_limit=capability.service_memory[1], **token) for key, capability in registry.items()}
    files["base/kustomization.yaml"] = GENERATED + KUSTOMIZATION.format(
        services="".join(f"  - {key}.yaml\n" for key in registry))
    files["base/card.yaml"] = GENERATED + GATEWAY.format(port=PORT, **token, urls="".join(
        f'            - {{name: JOBAWARE_{key.upper()}_URL, value: "http://jobaware-{key}:{PORT}"}}\n'
        for key in registry))
    files["overlays/production/ingress.yaml"] = GENERATED + INGRESS.format(
        host=INGRESS_HOST, paths="".join(INGRESS_PATH.format(key=key) for key in [*registry, "card"]))
    files["monitoring/podmonitor.yaml"] = GENERATED + MONITOR
    for overlay, (head, patch) in OVERLAYS.items():
        files[f"overlays/{overlay}/services.yaml"] = GENERATED + head + "".join(patch.format(key=key) for key in registry)
    return files


def differing(root: Path) -> list[str]:
    """The generated files under `root` (the `k8s/` folder) that differ from what the registry renders, and the
    capability files left from a capability no longer registered."""
    files = rendered()
    stale = [p.relative_to(root).as_posix() for p in (root / "base").glob("*.yaml")
             if p.read_text().startswith(GENERATED) and p.relative_to(root).as_posix() not in files]
    return sorted([path for path, text in files.items()
                   if not (root / path).is_file() or (root / path).read_text() != text] + stale)


def write(root: Path) -> list[str]:
    """Write what differs under `root`; remove generated files of capabilities no longer registered."""
    files, changed = rendered(), differing(root)
    for path in changed:
        if path in files:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(files[path])
        else:
            (root / path).unlink()
    return changed


def main(argv: list[str]) -> int:
    root = bundled("k8s")
    if "--check" in argv:
        changed = differing(root)
        print("\n".join(f"k8s/{path} differs from the registry" for path in changed) or "k8s/ is as the registry says")
        return 1 if changed else 0
    for path in write(root):
        print(f"wrote k8s/{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
