#!/usr/bin/env bash
# deploy/kubernetes/admission-certs.sh without a cluster: the certificate it makes
# verifies against its CA with the Service's names in its subjectAltName; gpuest-server
# serves it; a rotation keeps the CA (kube-apiserver's caBundle stays valid) and makes a
# new certificate; --new-ca puts the old CA beside the new one in the bundle.
# Usage: admission_certs_test.sh SOURCE_DIR GPUEST_SERVER
set -euo pipefail
source_dir=$1
server=$2
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
script="$source_dir/deploy/kubernetes/admission-certs.sh"

bash "$script" --out "$work/tls" --namespace ml-infra --service sizer 2>/dev/null
openssl verify -CAfile "$work/tls/ca.crt" "$work/tls/tls.crt" >/dev/null || fail "does not verify"
san=$(openssl x509 -in "$work/tls/tls.crt" -noout -ext subjectAltName)
for name in sizer.ml-infra.svc sizer.ml-infra.svc.cluster.local; do
  grep -q "DNS:$name\(,\|$\)" <<<"$san" || fail "no $name in: $san"
done
bundle=$(grep 'caBundle:' "$work/tls/admission-webhook.yaml" | grep -v '#' | sed 's/.*caBundle: "\(.*\)"/\1/')
[ "$(base64 -d <<<"$bundle")" = "$(cat "$work/tls/ca.crt")" ] || fail "caBundle is not the CA"

# gpuest-server serves it, and a client trusting the CA only completes the handshake.
"$server" --listen=127.0.0.1:0 --metrics-listen= --models="$source_dir/models" \
  --ready-file="$work/ready.json" --admission-listen=127.0.0.1:0 \
  --admission-tls-cert="$work/tls/tls.crt" --admission-tls-key="$work/tls/tls.key" \
  2>"$work/server.log" &
pid=$!
for _ in $(seq 600); do [ -f "$work/ready.json" ] && break; sleep 0.1; done
[ -f "$work/ready.json" ] || fail "server did not start: $(cat "$work/server.log")"
port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['admission_port'])" "$work/ready.json")
echo | openssl s_client -connect "127.0.0.1:$port" -servername sizer.ml-infra.svc \
  -verify_hostname sizer.ml-infra.svc -CAfile "$work/tls/ca.crt" -verify_return_error \
  >"$work/handshake" 2>&1 || fail "handshake: $(tail -5 "$work/handshake")"

ca_before=$(cat "$work/tls/ca.crt")
cert_before=$(cat "$work/tls/tls.crt")
bash "$script" --out "$work/tls" --namespace ml-infra --service sizer 2>/dev/null
[ "$(cat "$work/tls/ca.crt")" = "$ca_before" ] || fail "a rotation replaced the CA"
[ "$(cat "$work/tls/tls.crt")" != "$cert_before" ] || fail "a rotation kept the certificate"
bash "$script" --out "$work/tls" --namespace ml-infra --service sizer --new-ca 2>/dev/null
[ "$(grep -c 'BEGIN CERTIFICATE' "$work/tls/ca-bundle.crt")" = 2 ] || fail "--new-ca: bundle lacks the old CA"
grep -qF "$(sed -n 2p <<<"$ca_before")" "$work/tls/ca-bundle.crt" || fail "--new-ca: old CA not in the bundle"
echo "admission-certs.sh: certificate, serving, rotation and CA change as documented"
