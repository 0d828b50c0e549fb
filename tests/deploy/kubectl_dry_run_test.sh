#!/usr/bin/env bash
# The admission webhook's kubectl steps that work without a cluster (client dry-runs
# need the API server's discovery; these do not): the Secret admission-certs.sh writes,
# and the Deployment patch applied locally to deploy/kubernetes/gpuest.yaml's Deployment,
# which must then carry the webhook's flags, port and certificate volume.
# Usage: kubectl_dry_run_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
k8s="$source_dir/deploy/kubernetes"
command -v kubectl >/dev/null || fail "no kubectl (deploy/install-deps.sh installs kubernetes-client)"

bash "$k8s/admission-certs.sh" --out "$work/tls" 2>/dev/null
kubectl -n gpuest create secret tls gpuest-webhook-tls --cert "$work/tls/tls.crt" \
  --key "$work/tls/tls.key" --dry-run=client -o json >"$work/secret.json"
/usr/bin/python3 - "$work/secret.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["kind"] == "Secret" and s["type"] == "kubernetes.io/tls", s
assert s["metadata"]["name"] == "gpuest-webhook-tls" and set(s["data"]) == {"tls.crt", "tls.key"}
PY

/usr/bin/python3 - "$k8s/gpuest.yaml" "$work/deployment.json" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"]
json.dump(docs[0], open(sys.argv[2], "w"))
PY
kubectl patch -f "$work/deployment.json" --local --type json \
  -p "$(cat "$k8s/admission-deployment.patch.json")" -o json >"$work/patched.json"
/usr/bin/python3 - "$work/patched.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pod = d["spec"]["template"]["spec"]
server = pod["containers"][0]
assert "--admission-listen=0.0.0.0:8443" in server["args"], server["args"]
assert {"name": "admission", "containerPort": 8443} in [
    {k: p[k] for k in ("name", "containerPort")} for p in server["ports"]], server["ports"]
assert any(m["name"] == "webhook-tls" and m["mountPath"] == "/tls" for m in server["volumeMounts"])
assert any(v["name"] == "webhook-tls" and v["secret"]["secretName"] == "gpuest-webhook-tls"
           for v in pod["volumes"])
PY
echo "kubectl dry-runs: the Secret and the patched Deployment are as admission-certs.sh applies them"
