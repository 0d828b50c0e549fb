#!/usr/bin/env python3
"""Validates everything in deploy/ that an operator applies, against the real thing.

- Kubernetes manifests: they parse; kinds and apiVersions are ones the cluster serves;
  selectors, ports, volumes and probes agree with each other; the pod runs non-root,
  with a read-only root file system and no capabilities; every server flag in them is a
  flag the built gpuest-server knows.
- Prometheus rules: `promtool check rules` and `promtool test rules`.
- Grafana dashboard and rules: every metric they name exists in the /metrics of a real
  gpuest-server started here (after one Estimate), with the labels they select on (a
  family the server declares but has no series of yet is checked by name only), and
  the dashboard shows every gpuest_* family.
- Dockerfile (no docker daemon in CI, and Debian packages no hadolint): multi-stage on
  bookworm, non-root USER, HEALTHCHECK, sources that exist, server flags it knows, and a
  runtime package list that covers every shared library the built binaries link.
- systemd unit: its flags and models path.

Usage: validate_deploy.py --source-dir DIR --server BIN --cli BIN --promtool BIN
                          --deps-prefix DIR
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
    return condition


# --- the real server -----------------------------------------------------------------

def server_flags(server):
    """The flags gpuest-server --help lists, without dashes' spelling differences."""
    out = subprocess.run([server, "--help"], capture_output=True, text=True, check=True).stdout
    return {m.replace("_", "-") for m in re.findall(r"^\s+--([a-z0-9_-]+)", out, re.M)}


def check_server_args(where, args, known):
    for arg in args:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0].replace("_", "-")
            check(name in known, f"{where}: --{name} is not a gpuest-server flag")


def scrape_metrics(server, cli, source_dir):
    """Families {name: (kind, {label names})} of a real server after one Estimate."""
    with tempfile.TemporaryDirectory() as tmp:
        ready = os.path.join(tmp, "ready.json")
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = subprocess.Popen(
            [server, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
             "--models=" + os.path.join(source_dir, "models"), "--ready-file=" + ready],
            stdout=log, stderr=log)
        try:
            deadline = time.time() + 120
            while not os.path.exists(ready):
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("gpuest-server did not start: " +
                                       open(os.path.join(tmp, "server.log")).read())
                time.sleep(0.05)
            ports = json.load(open(ready))
            subprocess.run([cli, "--target=127.0.0.1:%d" % ports["grpc_port"], "--timeout=30s",
                            "estimate", os.path.join(source_dir, "examples", "cnn.json")],
                           check=True, capture_output=True)
            url = "http://127.0.0.1:%d/metrics" % ports["metrics_port"]
            text = urllib.request.urlopen(url, timeout=30).read().decode()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    families = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            families[m.group(1)] = (m.group(2), set())
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            name = re.sub(r"_(bucket|count|sum)$", "", m.group(1))
            if name in families:
                families[name][1].update(re.findall(r'([a-zA-Z_]\w*)="', m.group(2) or ""))
    return families


def declared_families(source_dir, families):
    """Adds the gpuest_* families server/*.cc declares that /metrics did not show:
    prometheus-cpp leaves out a family with no series yet (a counter of refusals before
    the first one). Their kind and labels are unknown, so only their names are checked."""
    server_dir = os.path.join(source_dir, "server")
    for name in sorted(os.listdir(server_dir)):
        if name.endswith(".cc"):
            for family in re.findall(r'"(gpuest_[a-z0-9_]+)"', open(os.path.join(server_dir, name)).read()):
                families.setdefault(family, ("unknown", None))
    return families


# --- PromQL --------------------------------------------------------------------------

# Labels Prometheus itself attaches to every scraped series, and the bucket label.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
PROMETHEUS_SERIES = {"up"}  # Made by Prometheus for every target.


def check_expression(where, expr, families, records):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # Label values cannot confuse names.
    used = set()
    for m in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?", expr):
        name, selector = m.group(1), m.group(2) or ""
        if name in records or name in PROMETHEUS_SERIES:
            continue
        if not name.startswith("gpuest_"):
            continue  # Functions, keywords, label names in by (...), $__ variables.
        suffix = re.search(r"_(bucket|count|sum)$", name)
        base = name[: suffix.start()] if suffix and name[: suffix.start()] in families else name
        if not check(base in families, f"{where}: {name} is not in gpuest-server's /metrics"):
            continue
        kind, labels = families[base]
        if labels is None:
            continue  # Declared, no series yet: the name is all there is to check.
        check(base == name or kind in ("histogram", "summary"),
              f"{where}: {name} takes a histogram suffix, but {base} is a {kind}")
        check(base != name or kind != "histogram",
              f"{where}: {name} is a histogram; name its _bucket, _count or _sum")
        allowed = labels | TARGET_LABELS | ({"le"} if name.endswith("_bucket") else set())
        for label in re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", selector):
            check(label in allowed, f"{where}: {name} has no label {label!r} (has {sorted(labels)})")
        used.add(base)
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        if any(families[u][1] is None for u in used):
            continue
        every = set().union(*(families[u][1] for u in used)) if used else set()
        for label in re.findall(r"\w+", group):
            check(label in every | TARGET_LABELS | {"le"} or not used,
                  f"{where}: by ({label}) is not a label of {sorted(used)}")


def check_rules(path, families, promtool):
    doc = yaml.safe_load(open(path))
    records = {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        name = rule.get("record") or rule.get("alert")
        check_expression(f"{os.path.basename(path)} {name}", rule["expr"], families, records)
    names = {a["alert"] for a in alerts}
    for required in ("GpuestLatencyObjective", "GpuestTargetDown", "GpuestErrors",
                     "GpuestShedding"):
        check(required in names, f"{path}: no {required} alert")
    # The latency objective is the 1 ms bucket boundary the server's histogram has.
    check('le="0.001"' in open(path).read(), f"{path}: the objective is not le=\"0.001\"")
    for args in (["check", "rules", path],
                 ["test", "rules", os.path.basename(path).replace(".yml", ".test.yml")]):
        r = subprocess.run([promtool] + args, capture_output=True, text=True,
                           cwd=os.path.dirname(path))
        check(r.returncode == 0, f"promtool {' '.join(args)}: {r.stdout}{r.stderr}")
    return records


def check_dashboard(path, families, records):
    dash = json.load(open(path))
    check(dash.get("uid") and dash.get("title"), f"{path}: no uid or title")
    check(isinstance(dash.get("schemaVersion"), int), f"{path}: no schemaVersion")
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)), f"{path}: duplicate panel ids")
    named = set()
    for panel in dash["panels"]:
        check(panel.get("targets"), f"{path}: panel {panel.get('title')!r} has no query")
        for target in panel.get("targets", []):
            check_expression(f"{os.path.basename(path)} panel {panel['title']!r}",
                             target["expr"], families, records)
            named.update(re.findall(r"\bgpuest_[a-z_]+", target["expr"]))
    # Every family the server itself exports is on the dashboard (prometheus-cpp's own
    # exposer_* families are not gpuest's).
    for family in (f for f in families if f.startswith("gpuest_")):
        check(any(n.startswith(family) for n in named),
              f"{path}: the dashboard shows nothing of {family}")


# --- Kubernetes ----------------------------------------------------------------------

# The kinds the manifests may use, with the apiVersion current clusters serve.
API_VERSIONS = {
    "Namespace": "v1", "Service": "v1", "ConfigMap": "v1", "Secret": "v1",
    "Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1",
    "ServiceAccount": "v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
}


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_container(where, c, pod, volumes, known_flags):
    sc = c.get("securityContext", {})
    check(sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation")
    check(sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem")
    check("ALL" in sc.get("capabilities", {}).get("drop", []), f"{where}: capabilities not dropped")
    check(c.get("resources", {}).get("limits", {}).get("memory"), f"{where}: no memory limit")
    for m in c.get("volumeMounts", []):
        check(m["name"] in volumes, f"{where}: mounts unknown volume {m['name']}")
    if c.get("args"):
        check_server_args(where, c["args"], known_flags)


def check_kubernetes(path, known_flags, deployment_patch=None):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    if deployment_patch:
        for d in docs:
            if d.get("kind") == "Deployment":
                apply_json_patch(d, deployment_patch)
    failures_before = len(FAILURES)
    by_kind = {}
    for d in docs:
        kind = d.get("kind")
        check(API_VERSIONS.get(kind) == d.get("apiVersion"),
              f"{path}: {kind} with apiVersion {d.get('apiVersion')}")
        check(d.get("metadata", {}).get("name"), f"{path}: {kind} without a name")
        by_kind.setdefault(kind, []).append(d)
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor"):
        check(len(by_kind.get(kind, [])) == 1, f"{path}: expected one {kind}")
    if len(FAILURES) > failures_before:
        return
    dep, svc = by_kind["Deployment"][0], by_kind["Service"][0]
    pdb, mon = by_kind["PodDisruptionBudget"][0], by_kind["ServiceMonitor"][0]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    pod = dep["spec"]["template"]["spec"]
    check(matches(dep["spec"]["selector"]["matchLabels"], pod_labels), "Deployment selector")
    check(matches(svc["spec"]["selector"], pod_labels), "Service selector")
    check(matches(pdb["spec"]["selector"]["matchLabels"], pod_labels), "PodDisruptionBudget selector")
    check(pdb["spec"].get("minAvailable", 0) < dep["spec"]["replicas"],
          "PodDisruptionBudget would block every drain")
    check(matches(mon["spec"]["selector"]["matchLabels"], svc["metadata"].get("labels", {})),
          "ServiceMonitor selects no Service")
    svc_ports = {p["name"] for p in svc["spec"]["ports"]}
    for e in mon["spec"]["endpoints"]:
        check(e["port"] in svc_ports, f"ServiceMonitor port {e['port']} not on the Service")
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0, "pod runs as root")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    check("models" in volumes, "no models volume")
    containers = pod["containers"]
    server = containers[0]
    container_ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    for p in svc["spec"]["ports"]:
        check(p["targetPort"] in container_ports, f"Service targetPort {p['targetPort']}")
    for c in pod.get("initContainers", []) + containers:
        check_container(f"{path} container {c['name']}", c, pod, volumes, known_flags)
    args = dict(a[2:].split("=", 1) for a in server["args"] if "=" in a)
    mount = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}
    check(args.get("models") == mount.get("models"), "--models is not the models volume")
    check(any(m["name"] == "models" and m.get("readOnly") for m in server["volumeMounts"]),
          "the server mounts its models writable")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        port = server.get(probe, {}).get("grpc", {}).get("port")
        check(port in container_ports.values(), f"{probe} on no container port")
    check(args.get("listen", "").endswith(":%d" % container_ports["grpc"]), "--listen port")
    check(args.get("metrics-listen", "").endswith(":%d" % container_ports["metrics"]),
          "--metrics-listen port")


def check_network_policies(path, deployment_path, patch_path):
    """Each policy selects the server's pods and admits one of its ports (by name or
    number, the webhook's as the Deployment patch adds it); every port the server's
    container declares has a policy, so none is left open or closed by accident."""
    policies = [d for d in yaml.safe_load_all(open(path)) if d]
    dep = next(d for d in yaml.safe_load_all(open(deployment_path))
               if d and d.get("kind") == "Deployment")
    apply_json_patch(dep, json.load(open(patch_path)))
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"]
             for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]}
    covered = set()
    for pol in policies:
        name = pol.get("metadata", {}).get("name")
        check(pol.get("kind") == "NetworkPolicy" and
              pol.get("apiVersion") == API_VERSIONS["NetworkPolicy"],
              f"{path}: {name} is not a networking.k8s.io/v1 NetworkPolicy")
        spec = pol.get("spec", {})
        check(matches(spec.get("podSelector", {}).get("matchLabels", {}), pod_labels),
              f"{path}: {name} does not select the server's pods")
        check(spec.get("policyTypes") == ["Ingress"], f"{path}: {name} policyTypes")
        for rule in spec.get("ingress", []):
            check(rule.get("from"), f"{path}: {name} admits everyone")
            for peer in rule.get("from", []):
                check(set(peer) <= {"namespaceSelector", "podSelector", "ipBlock"},
                      f"{path}: {name}: unknown peer {sorted(peer)}")
            for p in rule.get("ports", []):
                port = p.get("port")
                number = ports.get(port, port)
                check(number in ports.values(),
                      f"{path}: {name} admits port {port}, which the server does not serve")
                covered.add(number)
    for pname, number in ports.items():
        check(number in covered, f"{path}: no policy admits the server's port {pname}")


def apply_json_patch(doc, patch):
    """RFC 6902 "add" operations, as `kubectl patch --type json` applies them."""
    for op in patch:
        check(op.get("op") == "add", f"patch: only add operations expected, got {op}")
        *parents, last = op["path"].strip("/").split("/")
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]


def check_admission(path, deployment_path, patch_path, known_flags):
    """The webhook configuration, its Service, and the Deployment with the patch applied:
    they name each other's ports, paths and volumes, and select no control plane."""
    patch = json.load(open(patch_path))
    failures_before = len(FAILURES)
    check_kubernetes(deployment_path, known_flags, patch)  # The patched Deployment.
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by_kind = {}
    for d in docs:
        check(API_VERSIONS.get(d.get("kind")) == d.get("apiVersion"),
              f"{path}: {d.get('kind')} with apiVersion {d.get('apiVersion')}")
        by_kind.setdefault(d.get("kind"), []).append(d)
    services, configs = by_kind.get("Service", []), by_kind.get("MutatingWebhookConfiguration", [])
    if not (check(len(services) == 1, f"{path}: expected one Service") and
            check(len(configs) == 1, f"{path}: expected one MutatingWebhookConfiguration")):
        return
    svc = services[0]
    check(svc["spec"].get("clusterIP") != "None",
          f"{path}: kube-apiserver calls a webhook through a ClusterIP; the Service is headless")
    deployment = [d for d in yaml.safe_load_all(open(deployment_path))
                  if d and d.get("kind") == "Deployment"][0]
    apply_json_patch(deployment, patch)
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    args = dict(a[2:].split("=", 1) for a in server["args"] if "=" in a)
    check(args.get("admission-listen", "").endswith(":%d" % ports.get("admission", -1)),
          "--admission-listen is not the admission port")
    mounts = {m["mountPath"] for m in server["volumeMounts"]}
    for flag in ("admission-tls-cert", "admission-tls-key"):
        check(os.path.dirname(args.get(flag, "")) in mounts, f"--{flag} is on no mounted volume")
    check(matches(svc["spec"]["selector"],
                  deployment["spec"]["template"]["metadata"]["labels"]),
          "the webhook Service selects no gpuest pod")
    svc_ports = {p["port"]: p["targetPort"] for p in svc["spec"]["ports"]}
    for hook in configs[0]["webhooks"]:
        where = f"{path}: webhook {hook.get('name')}"
        check("v1" in hook.get("admissionReviewVersions", []), f"{where}: not v1")
        check(hook.get("sideEffects") in ("None", "NoneOnDryRun"), f"{where}: sideEffects")
        check(0 < hook.get("timeoutSeconds", 0) <= 30, f"{where}: timeoutSeconds")
        check(hook.get("failurePolicy") in ("Ignore", "Fail"), f"{where}: failurePolicy")
        ref = hook["clientConfig"]["service"]
        check(ref["name"] == svc["metadata"]["name"] and
              ref["namespace"] == svc["metadata"]["namespace"], f"{where}: names another Service")
        check(ref.get("path") == "/mutate", f"{where}: the server serves POST /mutate")
        check(svc_ports.get(ref.get("port", 443)) == "admission", f"{where}: port")
        check("caBundle" in hook["clientConfig"], f"{where}: no caBundle for the script to fill")
        excluded = [e for e in hook.get("namespaceSelector", {}).get("matchExpressions", [])
                    if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn"]
        check(excluded and "kube-system" in excluded[0]["values"] and
              svc["metadata"]["namespace"] in excluded[0]["values"],
              f"{where}: selects kube-system or gpuest's own namespace")
        check(hook.get("namespaceSelector", {}).get("matchLabels"),
              f"{where}: namespaces are not selected by label")
        check(hook.get("objectSelector"), f"{where}: no objectSelector")
        # Pods, and DRA's claims and claim templates (DRA.md), on CREATE only.
        sized = {"": {"pods"}, "resource.k8s.io": {"resourceclaims", "resourceclaimtemplates"}}
        check(all(r.get("operations") == ["CREATE"] and len(r.get("apiGroups", [])) == 1 and
                  set(r.get("resources", [])) <= sized.get(r["apiGroups"][0], set())
                  for r in hook.get("rules", [])),
              f"{where}: sizes pods, resourceclaims and resourceclaimtemplates on CREATE only")
    if len(FAILURES) == failures_before:
        print("admission webhook manifests: valid")


# --- Dockerfile ----------------------------------------------------------------------

def dockerfile_instructions(path):
    text = re.sub(r"\\\n", " ", open(path).read())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def needed_packages(binaries, deps_lib):
    """Debian packages of the shared libraries the binaries (and the private
    prometheus-cpp they link) need, as the dynamic loader resolves them."""
    packages, seen, todo = set(), set(), list(binaries)
    while todo:
        binary = todo.pop()
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
        direct = re.findall(r"NEEDED\s+Shared library: \[([^\]]+)\]",
                            subprocess.run(["readelf", "-d", binary], capture_output=True,
                                           text=True, check=True).stdout)
        paths = dict(re.findall(r"^\s*(\S+) => (\S+)", out, re.M))
        for lib in direct:
            path = paths.get(lib)
            if not check(path and path != "not", f"{binary}: {lib} not found"):
                continue
            if path.startswith(deps_lib):
                if path not in seen:
                    seen.add(path)
                    todo.append(path)
                continue
            owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True,
                                   text=True)
            if owner.returncode != 0:
                owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if check(owner.returncode == 0, f"no Debian package has {path}"):
                packages.add(owner.stdout.split(":")[0])
    return packages


def check_dockerfile(path, source_dir, known_flags, binaries, deps_prefix):
    ins = dockerfile_instructions(path)
    froms = [rest for word, rest in ins if word == "FROM"]
    check(len(froms) >= 2, f"{path}: not multi-stage")
    check(all(re.match(r"debian:bookworm(-slim)?\b", f) for f in froms), f"{path}: not bookworm")
    stages = {m.group(1) for f in froms for m in [re.search(r"\bAS\s+(\S+)", f, re.I)] if m}
    last = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    final = ins[last:]
    users = [rest for word, rest in final if word == "USER"]
    check(users and users[-1].split(":")[0] not in ("0", "root"), f"{path}: final stage runs as root")
    check(any(w == "HEALTHCHECK" for w, _ in final), f"{path}: no HEALTHCHECK")
    for word, rest in ins:
        if word == "COPY":
            parts = shlex.split(rest)
            source_stage = [p.split("=", 1)[1] for p in parts if p.startswith("--from=")]
            files = [p for p in parts if not p.startswith("--")][:-1]
            if source_stage:
                check(source_stage[0] in stages, f"{path}: COPY --from an unknown stage")
            else:
                for f in files:
                    check(os.path.exists(os.path.join(source_dir, f)), f"{path}: COPY {f}: no such file")
    for word, rest in final:
        if word in ("CMD", "ENTRYPOINT") and rest.startswith("["):
            check_server_args(f"{path} {word}", json.loads(rest), known_flags)
    installs = " ".join(rest for word, rest in final if word == "RUN")
    m = re.search(r"apt-get install (.*?)(?:&&|$)", installs)
    runtime = {p for p in (m.group(1).split() if m else []) if not p.startswith("-")}
    check(runtime, f"{path}: the final stage installs no runtime packages")
    for package in sorted(runtime):
        r = subprocess.run(["apt-cache", "show", package], capture_output=True, text=True)
        check(r.returncode == 0, f"{path}: no Debian package {package}")
    base = {"libc6", "libgcc-s1"}  # In every Debian image (Essential or required).
    for package in sorted(needed_packages(binaries, os.path.join(deps_prefix, "lib"))):
        check(package in runtime | base,
              f"{path}: the binaries link a library of {package}, which the final stage lacks")
    copied = " ".join(rest for word, rest in final if word == "COPY")
    check(os.path.join(deps_prefix, "lib") in copied, f"{path}: prometheus-cpp is not copied")


def check_systemd(path, known_flags):
    text = re.sub(r"\\\n", " ", open(path).read())
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.M).group(1).split()
    check_server_args(path, exec_start[1:], known_flags)
    listen = [a for a in exec_start if a.startswith("--listen=")]
    check(listen, f"{path}: no --listen")


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--source-dir", "--server", "--cli", "--promtool", "--deps-prefix"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    deploy = os.path.join(os.path.abspath(a.source_dir), "deploy")
    known = server_flags(a.server)
    families = scrape_metrics(a.server, a.cli, a.source_dir)
    print("metric families on /metrics:", ", ".join(sorted(families)))
    declared_families(a.source_dir, families)
    records = check_rules(os.path.join(deploy, "prometheus", "gpuest.rules.yml"), families,
                          a.promtool)
    check_dashboard(os.path.join(deploy, "grafana", "gpuest-dashboard.json"), families, records)
    check_kubernetes(os.path.join(deploy, "kubernetes", "gpuest.yaml"), known)
    check_admission(os.path.join(deploy, "kubernetes", "admission-webhook.yaml"),
                    os.path.join(deploy, "kubernetes", "gpuest.yaml"),
                    os.path.join(deploy, "kubernetes", "admission-deployment.patch.json"), known)
    check_network_policies(os.path.join(deploy, "kubernetes", "network-policies.yaml"),
                           os.path.join(deploy, "kubernetes", "gpuest.yaml"),
                           os.path.join(deploy, "kubernetes", "admission-deployment.patch.json"))
    check_dockerfile(os.path.join(deploy, "docker", "Dockerfile"), a.source_dir, known,
                     [a.server, a.cli], a.deps_prefix)
    check_systemd(os.path.join(deploy, "gpuest-server.service"), known)
    for f in FAILURES:
        print("FAIL:", f)
    print("deploy files: %s" % ("%d problems" % len(FAILURES) if FAILURES else "all valid"))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
