"""The kustomize tree is well-formed: every referenced file exists and parses, images come from the project."""

import yaml

from tests.conftest import ROOT

K8S = ROOT / "k8s"


def test_kustomizations_reference_existing_parseable_manifests():
    for kustomization in K8S.rglob("kustomization.yaml"):
        spec = yaml.safe_load(kustomization.read_text())
        for resource in spec["resources"]:
            target = (kustomization.parent / resource).resolve()
            assert target.exists(), f"{kustomization}: {resource} does not exist"
            if target.is_file():
                docs = [d for d in yaml.safe_load_all(target.read_text()) if d]
                assert all("kind" in d and "apiVersion" in d for d in docs)


def test_services_run_the_project_image_as_non_root_with_probes():
    docs = [d for p in (K8S / "base").glob("*.yaml") if p.name != "kustomization.yaml" for d in yaml.safe_load_all(p.read_text()) if d]
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["image"] == "jobaware" and "readinessProbe" in container
