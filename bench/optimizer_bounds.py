#!/usr/bin/python3
"""A real CNN's bound with SGD-momentum and with Adam (issue 46): each torchvision model
described at batch 64 (gpuest.describe, trace included) and estimated for a100-40gb by a
real server with the shipped models; prints allocsim's upper bound and simulated reserved
peak for both optimizers. The two may differ by Adam's second state only.

  PYTHONPATH=python:build/python /usr/bin/python3 bench/optimizer_bounds.py
"""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "tests"))

import torchvision  # noqa: E402
from helpers import describe_dict  # noqa: E402
from server_process import ServerProcess  # noqa: E402

CLI = os.environ.get("GPUEST_CLI", os.path.join(REPO, "build", "client", "gpuest"))


def main():
    print("| model | SGD-momentum | Adam |\n|---|---|---|")
    with ServerProcess() as server:
        for name in ("resnet50", "mobilenet_v2", "efficientnet_b0"):
            row = [name]
            for optimizer in ("sgd_momentum", "adam"):
                described = describe_dict(getattr(torchvision.models, name)(),
                                          input_shape=(3, 224, 224), batch_size=64,
                                          optimizer=optimizer, name=name)
                path = os.path.join(server.workdir, f"{name}_{optimizer}.json")
                with open(path, "w") as f:
                    json.dump(described, f)
                answer = subprocess.run([CLI, "--target", server.target, "--gpu", "a100-40gb",
                                         "estimate", "--json", path],
                                        capture_output=True, text=True, timeout=120, check=True)
                allocsim = next(r for r in json.loads(answer.stdout)["results"]
                                if r["estimatorId"] == "allocsim")
                memory = allocsim["memory"]
                row.append("%.2f GiB (reserved %d MiB)" % (int(memory["upperBytes"]) / 2**30,
                                                          int(memory["reservedPeakBytes"]) >> 20))
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
