"""What the rendered Kubernetes manifests promise about secrets and the network, as checks
that return problems (k8s_test.py runs them on every render):

- check_secrets: which container can read which Secret (a volume it mounts, a projected
  source, an env reference). The coordinator's Secret (its key, the clients' tokens) is read
  by the coordinator alone; the workers' Secret (every worker's key) by the workers' init
  container `identity` alone, which copies the CA and its own pod's pair ($POD_NAME.crt and
  .key, nothing else) 0600 into an in-memory volume: lockstepd reads no Secret, only that
  volume. No Secret is mounted with bits beyond 0440 (the kubelet adds group read for the
  pod's fsGroup; the daemons refuse a key every user can read).
- check_network: the NetworkPolicies evaluated, as a network plugin does, for sample pods
  (a worker, the coordinator, a client, another pod of the namespace, a client-labelled pod
  of another namespace, a host outside the cluster): the coordinator's gRPC port admits
  workers and clients only, a worker's data port workers only.
"""
import re

NAMESPACE = "lockstep"
COORDINATOR_SECRET = "lockstep-coordinator-tls"
WORKERS_SECRET = "lockstep-worker-tls"


def _find(objs, kind, name):
    return next((o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name), None)


def _secrets_read_by(container, spec):
    """{secret name: [the modes its files get]} that `container` can read."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    read = {}
    for m in container.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        if "secret" in v:
            sv = v["secret"]
            modes = [sv.get("defaultMode", 0o644)] + [i["mode"] for i in sv.get("items", []) if "mode" in i]
            read.setdefault(sv["secretName"], []).extend(modes)
        projected = v.get("projected", {})
        for source in projected.get("sources", []):
            if "secret" in source:
                modes = [projected.get("defaultMode", 0o644)]
                modes += [i["mode"] for i in source["secret"].get("items", []) if "mode" in i]
                read.setdefault(source["secret"]["name"], []).extend(modes)
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            read.setdefault(ref["name"], [])
    for e in container.get("envFrom", []):
        if "secretRef" in e:
            read.setdefault(e["secretRef"]["name"], [])
    return read


def _mount_of(container, path):
    """The volumeMount under which `path` lies (the longest), or None."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") + "/"
        if path.startswith(mp) and (best is None or len(mp) > len(best["mountPath"])):
            best = m
    return best


def _flag(container, name):
    values = [a.split("=", 1)[1] for a in container.get("args", []) if a.startswith(f"--{name}=")]
    return values[0] if values else None


def check_secrets(objs):
    problems = []
    readers = {}  # secret -> ["Deployment x/container", ...]
    for o in objs:
        if o["kind"] not in ("Deployment", "StatefulSet"):
            continue
        spec = o["spec"]["template"]["spec"]
        for kind, containers in (("init", spec.get("initContainers", [])),
                                 ("", spec.get("containers", []))):
            for c in containers:
                who = f"{o['kind']} {o['metadata']['name']}/{kind + ' ' if kind else ''}{c['name']}"
                for secret, modes in _secrets_read_by(c, spec).items():
                    readers.setdefault(secret, []).append(who)
                    for mode in modes:
                        if mode & ~0o440:
                            whom = "every user" if mode & 0o007 else "its owner's writes or its group"
                            problems.append(f"{who}: Secret {secret} is mounted mode {mode:04o}, "
                                            f"open to {whom} (at most 0440)")
    want = {COORDINATOR_SECRET: ["Deployment lockstep-coordinator/coordinator"],
            WORKERS_SECRET: ["StatefulSet lockstep-worker/init identity"]}
    for secret, who in sorted(readers.items()):
        if secret not in want:
            problems.append(f"Secret {secret} (read by {who}) is none of the deployment's: "
                            f"{sorted(want)}")
        elif sorted(who) != want[secret]:
            problems.append(f"Secret {secret} is readable by {sorted(who)}; only {want[secret]} may")
    for secret, who in want.items():
        if secret not in readers:
            problems.append(f"Secret {secret} is mounted by nobody (expected {who})")

    coordinator = _find(objs, "Deployment", "lockstep-coordinator")
    if coordinator:
        spec = coordinator["spec"]["template"]["spec"]
        c = next(c for c in spec["containers"] if c["name"] == "coordinator")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for flag in ("tls_key", "tokens_file"):
            path = _flag(c, flag)
            m = _mount_of(c, path) if path else None
            secret = volumes.get(m["name"], {}).get("secret", {}).get("secretName") if m else None
            if secret != COORDINATOR_SECRET:
                problems.append(f"the coordinator's --{flag} ({path}) is not in {COORDINATOR_SECRET}")

    workers = _find(objs, "StatefulSet", "lockstep-worker")
    if workers:
        problems += _check_worker_identity(workers["spec"]["template"]["spec"])
    return problems


def _check_worker_identity(spec):
    """lockstepd's key is its own: the init container copies only this pod's pair into an
    in-memory volume, private (umask 077), that lockstepd reads its TLS files from."""
    problems = []
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    lockstepd = next(c for c in spec["containers"] if c["name"] == "lockstepd")
    init = next((c for c in spec.get("initContainers", []) if c["name"] == "identity"), None)
    if init is None:
        return ["the workers have no init container `identity` to pick each pod's own key"]
    pod_name = [e for e in init.get("env", []) if e["name"] == "POD_NAME"]
    if not pod_name or pod_name[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        problems.append("the identity init container's POD_NAME is not the pod's name")
    script = "\n".join(init.get("command", []) + init.get("args", []))
    source = next((m["mountPath"] for m in init.get("volumeMounts", [])
                   if volumes.get(m["name"], {}).get("secret", {}).get("secretName") == WORKERS_SECRET),
                  None)
    copied = re.findall(r"\bcp\s+(.*)", script)
    if source is None or not copied:
        problems.append("the identity init container copies nothing out of the workers' Secret")
    for line in copied:
        for path in re.findall(re.escape(source or "/nonexistent") + r"/(\S+)", line):
            if path.strip('"') not in ("ca.crt", "$POD_NAME.crt", "$POD_NAME.key"):
                problems.append(f"the identity init container copies more than this pod's own "
                                f"pair and the CA: cp {line}")
        if re.search(r"\s-[a-zA-Z]*[rR]", line):
            problems.append(f"the identity init container copies a tree: cp {line}")
    if not re.search(r"\bumask\s+0?077\b", script):
        problems.append("the identity init container does not make its copies private (umask 077)")
    for flag in ("tls_ca", "tls_cert", "tls_key"):
        path = _flag(lockstepd, flag)
        m = _mount_of(lockstepd, path) if path else None
        v = volumes.get(m["name"], {}) if m else {}
        written = m is not None and any(
            im["name"] == m["name"] and not im.get("readOnly") for im in init.get("volumeMounts", []))
        if v.get("emptyDir", {}).get("medium") != "Memory" or not written:
            problems.append(f"lockstepd's --{flag} ({path}) is not in the in-memory volume the "
                            "identity init container writes")
    return problems


def _selects(selector, labels):
    """A LabelSelector (matchLabels, matchExpressions) against a label map."""
    if selector is None:
        return False
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions", []):
        has, value = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if ((op == "In" and value not in e.get("values", [])) or
                (op == "NotIn" and has and value in e.get("values", [])) or
                (op == "Exists" and not has) or (op == "DoesNotExist" and has)):
            return False
    return True


def _peer_admits(peer, source, policy_namespace):
    if "ipBlock" in peer:
        return source.get("external", False)  # any block: the conservative answer
    if source.get("external"):
        return False
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], source["namespace_labels"]):
            return False
    elif source["namespace"] != policy_namespace:
        return False
    return "podSelector" not in peer or _selects(peer["podSelector"], source["labels"])


def _port_admits(rule_ports, port, named_ports):
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        want = p.get("port")
        if want is None:
            return True
        number = named_ports.get(want, want) if isinstance(want, str) else want
        if number == port or (p.get("endPort") and number <= port <= p["endPort"]):
            return True
    return False


def reachable(objs, source, target_labels, port, named_ports):
    """Whether `source` may open a TCP connection to `port` of a pod with `target_labels`
    in NAMESPACE, under the NetworkPolicies in `objs` (Kubernetes' semantics: a pod that no
    Ingress policy selects admits everyone; one that some select admits what any admits)."""
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"
                and o["metadata"].get("namespace", NAMESPACE) == NAMESPACE
                and "Ingress" in o["spec"].get("policyTypes", ["Ingress"])
                and _selects(o["spec"].get("podSelector", {}), target_labels)]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            if not _port_admits(rule.get("ports"), port, named_ports):
                continue
            peers = rule.get("from")
            if not peers or any(_peer_admits(p, source, NAMESPACE) for p in peers):
                return True
    return False


def check_network(objs):
    problems = []
    coordinator = _find(objs, "Deployment", "lockstep-coordinator")
    workers = _find(objs, "StatefulSet", "lockstep-worker")
    if coordinator is None or workers is None:
        return ["no coordinator Deployment or worker StatefulSet to check the network of"]

    def pod(o):
        t = o["spec"]["template"]
        ports = {p["name"]: p["containerPort"] for c in t["spec"]["containers"]
                 for p in c.get("ports", []) if "name" in p}
        return t["metadata"].get("labels", {}), ports

    ns_labels = {"kubernetes.io/metadata.name": NAMESPACE}
    coordinator_labels, coordinator_ports = pod(coordinator)
    worker_labels, worker_ports = pod(workers)
    sources = {
        "a worker": {"namespace": NAMESPACE, "namespace_labels": ns_labels, "labels": worker_labels},
        "the coordinator": {"namespace": NAMESPACE, "namespace_labels": ns_labels,
                            "labels": coordinator_labels},
        "a client": {"namespace": NAMESPACE, "namespace_labels": ns_labels,
                     "labels": {"app.kubernetes.io/component": "client"}},
        "another pod of the namespace": {"namespace": NAMESPACE, "namespace_labels": ns_labels,
                                         "labels": {"app": "other"}},
        "a client-labelled pod of another namespace": {
            "namespace": "default", "namespace_labels": {"kubernetes.io/metadata.name": "default"},
            "labels": {"app.kubernetes.io/component": "client"}},
        "a host outside the cluster": {"external": True},
    }
    targets = [
        ("lockstep-coordinator", "grpc", coordinator_labels, coordinator_ports,
         {"a worker", "a client"}),
        ("lockstep-worker", "data", worker_labels, worker_ports, {"a worker"}),
    ]
    for name, port_name, labels, ports, allowed in targets:
        if port_name not in ports:
            problems.append(f"{name} declares no port named {port_name}")
            continue
        for who, source in sources.items():
            if who == "the coordinator" and name == "lockstep-coordinator":
                continue  # itself
            can = reachable(objs, source, labels, ports[port_name], ports)
            if can and who not in allowed:
                problems.append(f"{who} can reach {name}:{port_name} ({ports[port_name]})")
            if not can and who in allowed:
                problems.append(f"{who} cannot reach {name}:{port_name} ({ports[port_name]})")
    return problems
