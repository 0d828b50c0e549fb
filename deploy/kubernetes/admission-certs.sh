#!/usr/bin/env bash
# Makes, and on a second run rotates, the admission webhook's TLS: a CA, and a serving
# certificate it signs whose subjectAltName names the webhook's Service
# (SERVICE.NAMESPACE.svc, as kube-apiserver verifies it). Files go to OUT:
#   ca.crt ca.key       the CA; kept and reused on rotation (--new-ca replaces it)
#   tls.crt tls.key     the serving certificate (DAYS days), for the Secret
#   ca-bundle.crt       what kube-apiserver trusts: the CA, and during a CA change the
#                       previous one too, so no call fails while the new certificate reaches the pods
#   admission-webhook.yaml  deploy/kubernetes/admission-webhook.yaml with caBundle set
# With --apply (kubectl on the cluster) it then: writes the Secret gpuest-webhook-tls,
# applies the webhook configuration, and adds the webhook's flags, port and volume to
# the Deployment (admission-deployment.patch.json) unless it has them (which rolls the
# pods). On a rotation nothing restarts: kubelet updates the mounted Secret (within its
# sync period, about a minute) and gpuest-server reads the new files within a second.
#
# Usage: deploy/kubernetes/admission-certs.sh [--out DIR] [--namespace NS]
#          [--service NAME] [--days N] [--new-ca] [--apply]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=gpuest-webhook-tls
namespace=gpuest
service=gpuest-webhook
days=365
new_ca=false
apply=false
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --service) service=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --new-ca) new_ca=true; shift ;;
    --apply) apply=true; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "admission-certs.sh: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
case "$days" in ''|*[!0-9]*) echo "admission-certs.sh: --days takes a whole number" >&2; exit 2 ;; esac
log() { printf '[admission-certs] %s\n' "$*" >&2; }

mkdir -p "$out"
chmod 700 "$out"
cd "$out"
previous_ca=""
if [ -f ca.crt ] && [ "$new_ca" = true ]; then
  previous_ca=$(cat ca.crt)
  rm -f ca.crt ca.key
fi
if [ ! -f ca.crt ]; then
  log "making a CA (10 years) in $out"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout ca.key -out ca.crt -days 3650 -subj "/CN=gpuest admission webhook CA" 2>/dev/null
fi
log "signing a serving certificate for $service.$namespace.svc ($days days)"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout tls.key.new -out tls.csr -subj "/CN=$service.$namespace.svc" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
  "$service" "$service" "$namespace" "$service" "$namespace" "$service" "$namespace" >tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
  -extfile tls.ext -out tls.crt.new 2>/dev/null
openssl verify -CAfile ca.crt tls.crt.new >/dev/null
mv tls.key.new tls.key
mv tls.crt.new tls.crt
chmod 600 ca.key tls.key
rm -f tls.csr tls.ext
{ cat ca.crt; [ -z "$previous_ca" ] || printf '%s\n' "$previous_ca"; } >ca-bundle.crt
bundle=$(base64 -w0 <ca-bundle.crt)
sed "s|caBundle: \"\"|caBundle: \"$bundle\"|" "$here/admission-webhook.yaml" >admission-webhook.yaml
log "wrote ca.crt, tls.crt, tls.key, ca-bundle.crt and admission-webhook.yaml in $out"

if [ "$apply" != true ]; then
  log "not applied (--apply does it): kubectl -n $namespace create secret tls gpuest-webhook-tls --cert $out/tls.crt --key $out/tls.key; kubectl apply -f $out/admission-webhook.yaml; kubectl -n $namespace patch deployment gpuest --type json -p \"\$(cat $here/admission-deployment.patch.json)\"; then the Secret's files reach the pods within about a minute and are served from then on"
  exit 0
fi
kubectl -n "$namespace" create secret tls gpuest-webhook-tls --cert tls.crt --key tls.key \
  --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f admission-webhook.yaml
if ! kubectl -n "$namespace" get deployment gpuest -o jsonpath='{.spec.template.spec.containers[0].args}' |
  grep -q -- --admission-listen; then
  kubectl -n "$namespace" patch deployment gpuest --type json \
    -p "$(cat "$here/admission-deployment.patch.json")"
  # The new pod template rolls the pods; the PodDisruptionBudget keeps one answering.
  kubectl -n "$namespace" rollout status deployment gpuest --timeout 300s
fi
log "applied; rotate by running this again before $(openssl x509 -enddate -noout -in tls.crt | cut -d= -f2)"
