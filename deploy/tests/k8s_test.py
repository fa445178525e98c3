#!/usr/bin/python3
"""The Kubernetes manifests: the base and every overlay render with `kubectl kustomize`,
every rendered object validates against the Kubernetes API's schemas offline
(deploy/k8s/validate/validate.js: kubernetes-models, unknown fields refused), and the
objects keep what the deployment promises: non-root, read-only, no capabilities, requests
and limits, gRPC health probes, the coordinator's state on a claim, workers' task from their
ordinal (or, one StatefulSet per worker, from a TF_CONFIG naming it) on a fixed data port, a disruption budget, room for a preemption checkpoint.

    k8s_test.py K8S_DIR
"""
import copy
import json
import os
import re
import shutil
import sys

import yaml

from common import fail, home, run, skip, tmpdir
from k8s_secrets import check_network, check_secrets, worker_sets


def render(root, name):
    r = run(["kubectl", "kustomize", os.path.join(root, name)])
    if r.returncode != 0:
        fail(f"kubectl kustomize {name} failed:\n{r.stderr}")
    return r.stdout


def pod_specs(objs):
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet"):
            yield o, o["spec"]["template"]["spec"]


def duration_s(text):
    m = re.fullmatch(r"(\d+)(s|m)", text)
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1) if m else None


def check_task(o, lockstepd):
    """A worker's task is stable: its StatefulSet ordinal (--task_index_from_hostname), or,
    for a single-replica StatefulSet per worker, the TF_CONFIG naming lockstep-worker-N's
    task worker/N at its pod's own address."""
    what = f"{o['kind']} {o['metadata']['name']}"
    args = lockstepd.get("args", [])
    tf = [e.get("value", "") for e in lockstepd.get("env", []) if e["name"] == "TF_CONFIG"]
    if not tf:
        if "--task_index_from_hostname" not in args:
            return [f"{what}: workers do not take their task from the ordinal"]
        return []
    if "--task_index_from_hostname" in args:
        return [f"{what}: both a TF_CONFIG and --task_index_from_hostname (lockstepd refuses that)"]
    try:
        config = json.loads(tf[0])
        task, workers = config["task"], config["cluster"]["worker"]
    except (ValueError, KeyError, TypeError) as e:
        return [f"{what}: TF_CONFIG does not parse ({e}): {tf[0]}"]
    m = re.fullmatch(r".*-(\d+)", o["metadata"]["name"])
    pod = f"{o['metadata']['name']}-0"
    port = next((p["containerPort"] for p in lockstepd.get("ports", []) if p.get("name") == "data"), None)
    address = f"{pod}.{o['spec'].get('serviceName')}.{o['metadata'].get('namespace', 'lockstep')}.svc:{port}"
    problems = []
    if o["spec"].get("replicas", 1) != 1:
        problems.append(f"{what}: a TF_CONFIG names one task, but {o['spec']['replicas']} pods share it")
    if not m or task != {"type": "worker", "index": int(m.group(1))}:
        problems.append(f"{what}: TF_CONFIG's task {task} is not the worker its name numbers")
    elif int(m.group(1)) >= len(workers) or workers[int(m.group(1))] != address:
        problems.append(f"{what}: TF_CONFIG's cluster does not list its pod at {address}: {workers}")
    return problems


def check(name, objs):
    problems = []
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    if not worker_sets(objs):
        problems.append("no worker StatefulSet")
    for want in [("Deployment", "lockstep-coordinator"), ("PodDisruptionBudget", "lockstep-worker"),
                 ("PersistentVolumeClaim", "lockstep-coordinator-state")]:
        if want not in kinds:
            problems.append(f"no {want[0]} {want[1]}")
    for o, spec in pod_specs(objs):
        what = f"{o['kind']} {o['metadata']['name']}"
        for c in spec.get("initContainers", []):
            sc = c.get("securityContext", {})
            if (sc.get("allowPrivilegeEscalation") is not False or not sc.get("readOnlyRootFilesystem")
                    or sc.get("capabilities", {}).get("drop") != ["ALL"]):
                problems.append(f"{what}/{c['name']}: securityContext is not restrictive")
            if not c.get("resources", {}).get("requests") or not c.get("resources", {}).get("limits"):
                problems.append(f"{what}/{c['name']}: no requests and limits")
        psc = spec.get("securityContext", {})
        if not psc.get("runAsNonRoot") or psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{what}: pod securityContext lacks runAsNonRoot / seccomp RuntimeDefault")
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{what}: mounts a service account token")
        for c in spec["containers"]:
            sc = c.get("securityContext", {})
            if (sc.get("allowPrivilegeEscalation") is not False or not sc.get("readOnlyRootFilesystem")
                    or sc.get("capabilities", {}).get("drop") != ["ALL"]):
                problems.append(f"{what}/{c['name']}: securityContext is not restrictive")
            res = c.get("resources", {})
            if not res.get("requests") or not res.get("limits"):
                problems.append(f"{what}/{c['name']}: no requests and limits")
            for probe in ("readinessProbe", "livenessProbe"):
                if "grpc" not in c.get(probe, {}):
                    problems.append(f"{what}/{c['name']}: {probe} is not a gRPC health probe")
            args = c.get("args", [])
            health = [a for a in args if a.startswith("--health_address=")]
            port = c.get("readinessProbe", {}).get("grpc", {}).get("port")
            if not health or not health[0].endswith(f":{port}"):
                problems.append(f"{what}/{c['name']}: probes port {port} but {health}")
            if c["name"] == "lockstepd":
                problems += check_task(o, c)
                data = [a for a in args if a.startswith("--data_port=")]
                ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                if not data or int(data[0].split("=")[1]) != ports.get("data"):
                    problems.append(f"{what}: --data_port {data} is not the declared data port")
                grace = [duration_s(a.split("=")[1]) for a in args if a.startswith("--preemption_grace=")]
                if not grace or spec.get("terminationGracePeriodSeconds", 30) < grace[0] + 10:
                    problems.append(f"{what}: terminationGracePeriodSeconds leaves no room after "
                                    f"--preemption_grace {grace}")
                mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
                claims = {t["metadata"]["name"] for t in o["spec"].get("volumeClaimTemplates", [])}
                if "/var/lib/lockstepd" not in mounts or not claims:
                    problems.append(f"{what}: no claimed volume for checkpoints and summaries")
                if name == "overlays/gpu" and "nvidia.com/gpu" not in c["resources"].get("limits", {}):
                    problems.append(f"{what}: the GPU overlay's workers have no nvidia.com/gpu limit")
        if o["metadata"]["name"] == "lockstep-coordinator":
            if not any(v.get("persistentVolumeClaim") for v in spec.get("volumes", [])):
                problems.append("the coordinator's state is not on a PersistentVolumeClaim")
        if not any(v.get("secret") or v.get("csi") for v in spec.get("volumes", [])):
            problems.append(f"{what}: TLS material neither from a Secret nor from the CSI driver")
    return problems + check_secrets(objs) + check_network(objs)


def mutants(objs):
    """Renders broken the ways check_secrets and check_network must notice: (what the
    mutation does, the problem expected, the objects)."""
    def find(objs, kind, name):
        return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)

    out = []
    m = copy.deepcopy(objs)
    worker = find(m, "StatefulSet", "lockstep-worker")["spec"]["template"]["spec"]
    worker["volumes"].append({"name": "all", "secret": {"secretName": "lockstep-worker-tls"}})
    worker["containers"][0]["volumeMounts"].append({"name": "all", "mountPath": "/etc/lockstep/all"})
    out.append(("lockstepd mounts a Secret of every worker's keys", "mounts another worker's key", m))
    m = copy.deepcopy(objs)
    worker = find(m, "StatefulSet", "lockstep-worker")["spec"]["template"]["spec"]
    worker["initContainers"] = [{"name": "identity", "volumeMounts": [{"name": "all", "mountPath": "/w"}]}]
    worker["volumes"].append({"name": "all", "secret": {"secretName": "lockstep-worker-tls"}})
    out.append(("an init container mounts every worker's keys", "init identity mounts another", m))
    m = copy.deepcopy(objs)
    worker = find(m, "StatefulSet", "lockstep-worker")["spec"]["template"]["spec"]
    worker["volumes"].append({"name": "coordinator", "secret": {"secretName": "lockstep-coordinator-tls"}})
    worker["containers"][0]["volumeMounts"].append({"name": "coordinator", "mountPath": "/c"})
    out.append(("a worker mounts the coordinator's Secret", "lockstep-coordinator-tls is readable by", m))
    for attribute, value, want in [
            ("common-name", "lockstep-worker-0", "not its own pod's name"),
            ("organizationalunits", "", "no OU=daemon"),
            ("fs-group", "0", "cannot read its key")]:
        m = copy.deepcopy(objs)
        worker = find(m, "StatefulSet", "lockstep-worker")["spec"]["template"]["spec"]
        tls = next(v for v in worker["volumes"] if v["name"] == "tls")
        tls["csi"]["volumeAttributes"][f"csi.cert-manager.io/{attribute}"] = value
        out.append((f"the CSI certificate's {attribute} is {value!r}", want, m))
    m = copy.deepcopy(objs)
    coordinator = find(m, "Deployment", "lockstep-coordinator")["spec"]["template"]["spec"]
    next(v for v in coordinator["volumes"] if "secret" in v)["secret"]["defaultMode"] = 0o644
    out.append(("the coordinator's Secret is mode 0644", "every user", m))
    m = copy.deepcopy(objs)
    del find(m, "NetworkPolicy", "lockstep-worker")["spec"]["ingress"][0]["from"]
    out.append(("the data port is open to all", "can reach lockstep-worker:data", m))
    m = copy.deepcopy(objs)
    rules = find(m, "NetworkPolicy", "lockstep-coordinator")["spec"]["ingress"]
    rules[0]["from"].append({"namespaceSelector": {}})
    out.append(("any namespace reaches the coordinator", "can reach lockstep-coordinator:grpc", m))
    m = [o for o in copy.deepcopy(objs) if o["kind"] != "NetworkPolicy"]
    out.append(("no NetworkPolicy", "can reach", m))
    return out


def per_worker_mutants(objs):
    """The per-worker-Secrets overlay broken the ways check_worker_keys must notice."""
    def find(objs, name):
        return next(o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == name)

    out = []
    m = copy.deepcopy(objs)
    find(m, "lockstep-worker-1")["spec"]["replicas"] = 2
    out.append(("two pods share worker 1's Secret", "mounts another worker's key", m))
    m = copy.deepcopy(objs)
    spec = find(m, "lockstep-worker-1")["spec"]["template"]["spec"]
    next(v for v in spec["volumes"] if v["name"] == "tls")["secret"]["secretName"] = "lockstep-worker-0-0-tls"
    out.append(("worker 1 mounts worker 0's Secret", "not lockstep-worker-1-0-tls", m))
    m = copy.deepcopy(objs)
    c = find(m, "lockstep-worker-2")["spec"]["template"]["spec"]["containers"][0]
    tf = next(e for e in c["env"] if e["name"] == "TF_CONFIG")
    tf["value"] = tf["value"].replace('"index": 2', '"index": 1')
    out.append(("worker 2's TF_CONFIG claims worker/1", "not the worker its name numbers", m))
    return out


def main():
    if shutil.which("kubectl") is None or shutil.which("node") is None:
        skip("kubectl or node is not installed (tools/bootstrap.sh installs them)")
    modules = os.path.join(home(), ".cache", "lockstep-k8s-validate", "node_modules")
    if not os.path.isdir(os.path.join(modules, "kubernetes-models")):
        fail(f"the schema validators are not installed in {modules}: run tools/bootstrap.sh")
    # A real copy: kustomize refuses files whose real path is outside the kustomization.
    root = os.path.join(tmpdir(), "k8s")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.abspath(sys.argv[1]), root)
    names = ["base"] + [f"overlays/{o}" for o in sorted(os.listdir(os.path.join(root, "overlays")))]
    problems, files = [], []
    for name in names:
        text = render(root, name)
        path = os.path.join(tmpdir(), name.replace("/", "-") + ".yaml")
        open(path, "w").write(text)
        files.append(path)
        objs = [o for o in yaml.safe_load_all(text) if o]
        found = check(name, objs)
        problems += [f"{name}: {p}" for p in found]
        broken = {"base": mutants, "overlays/per-worker-secrets": per_worker_mutants}.get(name)
        if broken and not found:  # the checks can fail
            for what, want, broken_objs in broken(objs):
                found = check(name, broken_objs)
                if not any(want in p for p in found):
                    problems.append(f"the checks let a broken render through ({what}: no "
                                    f"'{want}' in {found})")
        print(f"{name}: {len(objs)} objects rendered")
    validate = os.path.join(root, "validate", "validate.js")
    v = run(["node", validate, modules] + files)
    print(v.stdout, end="")
    if v.returncode != 0:
        problems.append(f"schema validation failed:\n{v.stdout}{v.stderr}")
    # The validator refuses what the API server would: a misspelt field, a wrong type.
    broken = os.path.join(tmpdir(), "broken.yaml")
    text = open(files[0]).read()
    open(broken, "w").write(text.replace("readinessProbe:", "readinesProbe:", 1)
                            .replace("replicas: 3", "replicas: three", 1))
    b = run(["node", validate, modules, broken])
    for want in ("readinesProbe: unknown field", "/spec/replicas: must be integer"):
        if b.returncode == 0 or want not in b.stdout:
            problems.append(f"the validator let a broken manifest through (no '{want}'):\n{b.stdout}")
    if problems:
        fail("\n  ".join(["the manifests:"] + problems))
    print(f"ok: {len(names)} renders, every object valid")


if __name__ == "__main__":
    main()
