#!/usr/bin/python3
"""The admission webhook's latency against one Estimate RPC, in one run (issue 35).

Starts gpuest-server with the webhook over HTTPS (a throw-away certificate), then:
1. untouched pods (no gpuest.io/description) through POST /mutate, and reads the
   server's own time for them from /metrics (gpuest_request_duration_seconds,
   method="admission/mutate"): the goal is at most 100 us of server work;
2. interleaved, --calls times each: one Estimate RPC of the description (gpuest.Client,
   gRPC, the request prepared once as a scheduler's client does) and one sized pod
   through POST /mutate (HTTPS, kept alive), the same description in its annotation.
Prints each one's client-side p50/p99 and the ratio of the p99s: the goal is <= 2x.

--mode claim (issue 48, deploy/kubernetes/DRA.md) does step 2 with a
ResourceClaimTemplate instead of a pod: its spec.metadata carries the description and
its request asks for --device-class; the webhook answers one alternative per GPU model
the job fits (RankGpus: an estimate per catalog GPU). The goal is the same: the p99 of
a sized claim within 2x that of one Estimate RPC, measured as a ratio in one run.

  PYTHONPATH=python:build/python bench/admission_latency.py --calls 500
  PYTHONPATH=python:build/python bench/admission_latency.py --mode claim --calls 500
"""

import argparse
import base64
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "python"), os.path.join(REPO, "build", "python")]
import gpuest  # noqa: E402


def classes_table(args, workdir):
    """The built-in DRA table, --device-class's entry limited to --gpus (the models a
    cluster has: the only ones estimated); None without --gpus."""
    if not args.gpus:
        return None
    table = json.load(open(os.path.join(REPO, "integrations/kubernetes/dra_device_classes.json")))
    for entry in table["device_classes"]:
        if entry["device_class"] == args.device_class:
            entry["gpus"] = args.gpus.split(",")
    path = os.path.join(workdir, "dra_device_classes.json")
    json.dump(table, open(path, "w"))
    return path


def start_server(args, workdir):
    cert, key = os.path.join(workdir, "tls.crt"), os.path.join(workdir, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    ready = os.path.join(workdir, "ready.json")
    proc = subprocess.Popen(
        [args.server, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
         f"--models={os.path.join(REPO, 'models')}", f"--ready-file={ready}",
         "--admission-listen=127.0.0.1:0", f"--admission-tls-cert={cert}",
         f"--admission-tls-key={key}", f"--admission-gpu={args.gpu}", "--log-level=warn"] +
        ([f"--admission-dra-classes={args.classes}"] if args.classes else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("gpuest-server did not start: " + proc.stderr.read().decode())
        time.sleep(0.05)
    return proc, json.load(open(ready)), cert


def review(pod):
    kind = pod["kind"]
    group = "" if kind == "Pod" else "resource.k8s.io"
    resource = {"Pod": "pods", "ResourceClaim": "resourceclaims",
                "ResourceClaimTemplate": "resourceclaimtemplates"}[kind]
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "bench", "kind": {"group": group, "version": "v1", "kind": kind},
                    "resource": {"group": group, "version": "v1", "resource": resource},
                    "namespace": "ml", "operation": "CREATE", "object": pod,
                    "oldObject": None, "dryRun": False}}).encode()


def claim_template(description_text, device_class):
    """A ResourceClaimTemplate as deploy/kubernetes/dra-example.yaml writes one."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "train-gpu", "namespace": "ml"},
            "spec": {"metadata": {"annotations": {"gpuest.io/description": description_text}},
                     "spec": {"devices": {"requests": [
                         {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}}


def pod(annotations):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train", "namespace": "ml", "annotations": annotations},
            "spec": {"containers": [{"name": "trainer", "image": "pytorch",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def quantile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def mutation_histogram(metrics_port):
    """{upper bound: cumulative count} of the server's admission/mutate OK calls."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    buckets = {}
    for line in text.splitlines():
        if (line.startswith("gpuest_request_duration_seconds_bucket") and
                'method="admission/mutate"' in line and 'code="OK"' in line):
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.split()[-1])
    return buckets


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.path.join(REPO, "build/server/gpuest-server"))
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--gpu", default="a100-80gb")
    p.add_argument("--example", default=os.path.join(REPO, "examples", "cnn.json"))
    p.add_argument("--mode", choices=["pod", "claim"], default="pod",
                   help="what the webhook sizes against the Estimate RPC")
    p.add_argument("--device-class", default="gpu-shared.gpuest.io",
                   help="--mode claim: the request's deviceClassName")
    p.add_argument("--gpus", default="",
                   help="--mode claim: the class's models (ids, comma-separated), as an "
                        "operator lists the cluster's; default: every catalog model")
    args = p.parse_args()
    description_text = open(args.example).read()
    description = json.loads(description_text)
    with tempfile.TemporaryDirectory() as workdir:
        args.classes = classes_table(args, workdir)
        proc, ports, cert = start_server(args, workdir)
        try:
            context = ssl.create_default_context(cafile=cert)
            https = http.client.HTTPSConnection("127.0.0.1", ports["admission_port"],
                                                context=context)
            headers = {"Content-Type": "application/json"}

            def mutate(body):
                start = time.perf_counter()
                https.request("POST", "/mutate", body, headers)
                reply = https.getresponse()
                answer = json.loads(reply.read())
                elapsed = time.perf_counter() - start
                assert reply.status == 200 and answer["response"]["allowed"], answer
                return elapsed, answer["response"]

            untouched = review(pod({"team": "web"}))
            sized = review(claim_template(description_text, args.device_class)
                           if args.mode == "claim"
                           else pod({"gpuest.io/description": description_text}))
            for _ in range(50):  # Warm: connections, caches, the parser's buffers.
                mutate(untouched)
            before = mutation_histogram(ports["metrics_port"])
            plain = [mutate(untouched)[0] for _ in range(args.calls)]
            after = mutation_histogram(ports["metrics_port"])
            served = {le: after[le] - before.get(le, 0) for le in after}
            total = served[float("inf")]
            within = served.get(100e-6, 0)
            print(f"untouched pod, server work (/metrics): {within:.0f} of {total:.0f} calls "
                  f"<= 100 us ({100 * within / total:.1f} %), "
                  f"<= 50 us: {served.get(50e-6, 0):.0f}, <= 25 us: {served.get(25e-6, 0):.0f}")
            print(f"untouched pod, client-side over HTTPS: p50 {quantile(plain, 0.5) * 1e3:.3f} ms"
                  f" p99 {quantile(plain, 0.99) * 1e3:.3f} ms")

            client = gpuest.Client(f"127.0.0.1:{ports['grpc_port']}")
            estimate, webhook = [], []
            for _ in range(10):
                client.estimate(description, gpu=args.gpu)
                mutate(sized)
            for _ in range(args.calls):
                start = time.perf_counter()
                client.estimate(description, gpu=args.gpu)
                estimate.append(time.perf_counter() - start)
                elapsed, response = mutate(sized)
                assert "patch" in response, response
                webhook.append(elapsed)
            if args.mode == "claim":
                # What each pod's claim costs afterwards: kube-controller-manager makes it
                # from the sized template (its spec.metadata and spec), a list already.
                template = claim_template(description_text, args.device_class)
                response = mutate(sized)[1]
                made = json.loads(json.dumps(template))
                for op in json.loads(base64.b64decode(response["patch"])):
                    parts = [p.replace("~1", "/").replace("~0", "~")
                             for p in op["path"].split("/")[1:]]
                    node = made
                    for key in parts[:-1]:
                        node = node[int(key)] if isinstance(node, list) else node[key]
                    last = parts[-1]
                    if isinstance(node, list):
                        node[int(last)] = op["value"]
                    else:
                        node[last] = op["value"]
                claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": dict(made["spec"]["metadata"], name="train-0-gpu",
                                          namespace="ml"),
                         "spec": made["spec"]["spec"]}
                body = review(claim)
                from_template = []
                for _ in range(args.calls):
                    elapsed, response = mutate(body)
                    assert "patch" not in response, response
                    from_template.append(elapsed)
                print(f"claim made from the sized template (left as it is): p50 "
                      f"{quantile(from_template, 0.5) * 1e3:.3f} ms "
                      f"p99 {quantile(from_template, 0.99) * 1e3:.3f} ms")
                alternatives = len(made["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"])
                print(f"the sized template lists {alternatives} alternatives; "
                      f"models estimated per sizing: {args.gpus or 'every catalog GPU'}")
            e99, w99 = quantile(estimate, 0.99), quantile(webhook, 0.99)
            print(f"Estimate RPC (gRPC):    p50 {quantile(estimate, 0.5) * 1e3:.3f} ms "
                  f"p99 {e99 * 1e3:.3f} ms")
            what = f"sized claim ({args.device_class})" if args.mode == "claim" else "sized pod"
            print(f"{what} (/mutate): p50 {quantile(webhook, 0.5) * 1e3:.3f} ms "
                  f"p99 {w99 * 1e3:.3f} ms")
            print(f"ratio of p99s: {w99 / e99:.2f}x (goal <= 2x); {args.calls} calls each, "
                  f"interleaved, {args.example}, --gpu {args.gpu}")
            client.close()
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
