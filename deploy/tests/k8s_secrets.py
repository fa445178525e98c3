"""What the rendered Kubernetes manifests promise about secrets and the network, as checks
that return problems (k8s_test.py runs them on every render):

- check_secrets: which container can read which Secret (a volume it mounts, a projected
  source, an env reference). The coordinator's Secret (its key, the clients' tokens) is read
  by the coordinator alone. Every worker pod holds its own key and no other worker's
  (check_worker_keys): either cert-manager's CSI driver makes it in the pod (CN=${POD_NAME},
  OU=daemon: the identity the coordinator binds the pod's task to), or the pod is the only
  pod of its StatefulSet and mounts the one Secret named after it, <pod>-tls; a Secret
  mounted by a pod template shared by several pods, or one named after another pod, is
  another worker's key. lockstepd's --tls_* files come from that source. No Secret is
  mounted with bits beyond 0440 (the kubelet adds group read for the pod's fsGroup; the
  daemons refuse a key every user can read).
- check_network: the NetworkPolicies evaluated, as a network plugin does, for sample pods
  (a worker, the coordinator, a client, another pod of the namespace, a client-labelled pod
  of another namespace, a host outside the cluster): the coordinator's gRPC port admits
  workers and clients only, a worker's data port workers only.
"""
import re

NAMESPACE = "lockstep"
COORDINATOR_SECRET = "lockstep-coordinator-tls"
CSI_DRIVER = "csi.cert-manager.io"


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
    coordinator_readers = readers.pop(COORDINATOR_SECRET, [])
    if coordinator_readers != ["Deployment lockstep-coordinator/coordinator"]:
        problems.append(f"Secret {COORDINATOR_SECRET} is readable by {sorted(coordinator_readers)}; "
                        "only the coordinator may")

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

    workers = worker_sets(objs)
    if not workers:
        problems.append("no worker StatefulSet")
    for o in workers:
        problems += check_worker_keys(o)
    # Secrets read by no daemon's pod are none of the deployment's (a worker's is checked above).
    worker_readers = {f"StatefulSet {o['metadata']['name']}" for o in workers}
    for secret, who in sorted(readers.items()):
        if not all(any(w.startswith(r + "/") for r in worker_readers) for w in who):
            problems.append(f"Secret {secret} (read by {who}) is none of the deployment's")
    return problems


def worker_sets(objs):
    return [o for o in objs if o["kind"] == "StatefulSet" and
            o["spec"]["template"]["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "worker"]


def pod_names(o):
    """The names a StatefulSet gives its pods: <name>-0 .. <name>-(replicas-1)."""
    return [f"{o['metadata']['name']}-{i}" for i in range(o["spec"].get("replicas", 1))]


def check_worker_keys(o):
    """Every pod of worker StatefulSet `o` holds its own key and no other worker's, and
    lockstepd reads its TLS files from that key's volume."""
    name = f"StatefulSet {o['metadata']['name']}"
    spec = o["spec"]["template"]["spec"]
    pods = pod_names(o)
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    problems = []
    own = f"{pods[0]}-tls" if len(pods) == 1 else None
    for kind, containers in (("init", spec.get("initContainers", [])),
                             ("", spec.get("containers", []))):
        for c in containers:
            for secret in _secrets_read_by(c, spec):
                if secret == COORDINATOR_SECRET:
                    continue  # reported by check_secrets
                if secret != own:
                    whose = (f"a Secret every one of its {len(pods)} pods mounts" if len(pods) > 1
                             else f"not {own}, the Secret of its pod {pods[0]}")
                    problems.append(f"{name}/{kind + ' ' if kind else ''}{c['name']} mounts another "
                                    f"worker's key: Secret {secret} ({whose})")
    lockstepd = next((c for c in spec["containers"] if c["name"] == "lockstepd"), None)
    if lockstepd is None:
        return problems + [f"{name}: no container lockstepd"]
    sources = set()
    for flag in ("tls_ca", "tls_cert", "tls_key"):
        path = _flag(lockstepd, flag)
        m = _mount_of(lockstepd, path) if path else None
        if m is None:
            problems.append(f"{name}: lockstepd's --{flag} ({path}) is on no volume")
            continue
        sources.add(m["name"])
    for volume in sorted(sources):
        v = volumes.get(volume, {})
        if "csi" in v:
            problems += _check_csi_identity(name, v["csi"], spec)
        elif "secret" in v:
            if v["secret"].get("secretName") != own:
                problems.append(f"{name}: lockstepd's TLS files are in Secret "
                                f"{v['secret'].get('secretName')}, not its own pod's ({own})")
        else:
            problems.append(f"{name}: lockstepd's TLS files are in volume {volume}, neither "
                            f"cert-manager's CSI driver nor its own pod's Secret")
    if len(sources) > 1:
        problems.append(f"{name}: lockstepd's CA, certificate and key come from {sorted(sources)}, "
                        "not from one identity")
    return problems


def _check_csi_identity(name, csi, spec):
    """cert-manager's CSI driver makes each pod its own key, with a certificate naming that
    pod as a daemon (CN=${POD_NAME}, OU=daemon), readable by the pod's group only."""
    problems = []
    attrs = csi.get("volumeAttributes", {})
    a = lambda k: attrs.get(f"csi.cert-manager.io/{k}", "")
    if csi.get("driver") != CSI_DRIVER:
        problems.append(f"{name}: the TLS volume's CSI driver is {csi.get('driver')}, not {CSI_DRIVER}")
    if not csi.get("readOnly"):
        problems.append(f"{name}: the CSI TLS volume is not read-only")
    if a("common-name") != "${POD_NAME}":
        problems.append(f"{name}: the CSI certificate's CN is {a('common-name')!r}, not its own "
                        "pod's name (${POD_NAME}): pods would share an identity")
    if "daemon" not in [u.strip() for u in a("organizationalunits").split(",")]:
        problems.append(f"{name}: the CSI certificate has no OU=daemon: the coordinator takes it "
                        "for no worker")
    if not a("issuer-name"):
        problems.append(f"{name}: the CSI volume names no issuer")
    usages = [u.strip() for u in a("key-usages").split(",")]
    if "client auth" not in usages:
        problems.append(f"{name}: the CSI certificate is not for client auth (key-usages {usages})")
    group = spec.get("securityContext", {}).get("runAsGroup")
    if a("fs-group") != str(group):
        problems.append(f"{name}: the CSI files' group {a('fs-group')!r} is not the pod's group "
                        f"{group}: lockstepd cannot read its key")
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
    workers = next(iter(worker_sets(objs)), None)
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
