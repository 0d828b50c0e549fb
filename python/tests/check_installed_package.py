"""What a user does after `pip install ./python`, run by ctest (python.installed_package)
with the Python of a fresh virtual environment the wheel was installed into: describe a
torchvision model, estimate it on a real gpuest-server with gpuest.Client, read the
recommendation; the console script and `python -m gpuest.describe` too.

Not a pytest module: it must import the installed gpuest, never the checkout's (this
directory is on sys.path for server_process only; python/ is not).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from server_process import ServerProcess


def check(condition, what):
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def main():
    import gpuest
    import gpuest.v1
    from gpuest.describe import layer_types

    site = os.path.realpath(sys.prefix)
    check(os.path.realpath(gpuest.__file__).startswith(site + os.sep),
          f"gpuest is the installed package ({gpuest.__file__})")
    check(os.path.realpath(gpuest.v1.__file__).startswith(site + os.sep),
          "gpuest.v1 was generated into the installed package")
    check(str(layer_types.table_path()).startswith(os.path.dirname(gpuest.v1.__file__)),
          "layer_types.json is the package's own copy")
    import gpuest.client
    check(str(gpuest.client.policy_path()).startswith(os.path.dirname(gpuest.v1.__file__)),
          "client_policy.json is the package's own copy")
    check("torch" not in sys.modules, "importing gpuest imports no torch")

    with ServerProcess() as server:
        # The README's five lines.
        import torchvision
        description = gpuest.describe(torchvision.models.resnet18(), input_shape=(3, 224, 224),
                                      batch_size=32)
        client = gpuest.Client(server.target)
        recommendation = client.estimate(description, gpu="a100-40gb").recommendation
        print(f"recommended {recommendation.memory_bytes / 2**30:.2f} GiB by "
              f"{recommendation.estimator_id}: {recommendation.basis}")

        check(isinstance(description, gpuest.v1.ModelDescription),
              "describe returns a gpuest.v1.ModelDescription")
        check(len(description.trace.size_bytes) > 100, "the description carries a trace")
        check(recommendation.estimator_id == "allocsim",
              "the trace's simulation is recommended for a CNN")
        check(2**30 < recommendation.memory_bytes < 40 * 2**30,
              "ResNet-18 at batch 32 needs a few GiB")
        check(recommendation.fit.gpu == "a100-40gb" and recommendation.fit.fits,
              "it fits the A100 40GB")
        check(client.health() == "SERVING", "health")

        workdir = tempfile.mkdtemp(prefix="gpuest-installed-")
        out = os.path.join(workdir, "r18.json")
        script = shutil.which("gpuest-describe", path=os.path.dirname(sys.executable))
        check(script is not None, "the gpuest-describe console script is installed")
        r = subprocess.run([script, "--model", "torchvision.models:resnet18", "--input-shape",
                            "3,64,64", "--batch-size", "4", "-o", out],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"gpuest-describe writes a description ({r.stderr.strip()})")
        with open(out) as f:
            response = client.estimate(json.load(f))
        check(response.recommendation.memory_bytes > 0, "its JSON file is estimated")
        r = subprocess.run([sys.executable, "-m", "gpuest.describe", "--help"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "python3 -m gpuest.describe" in r.stdout,
              "python -m gpuest.describe still works")
        # The collector's console script: a plan of one torchvision model expands to
        # its jobs (fp32 and amp at two batch sizes).
        collect = shutil.which("gpuest-collect", path=os.path.dirname(sys.executable))
        check(collect is not None, "the gpuest-collect console script is installed")
        plan = os.path.join(workdir, "plan.json")
        with open(plan, "w") as f:
            json.dump({"models": [{"source": "torchvision", "names": ["resnet18"],
                                   "batch_sizes": [8, 16], "input_shape": [3, 64, 64],
                                   "optimizers": ["sgd"], "precisions": ["fp32", "amp"]}]},
                      f)
        r = subprocess.run([collect, "plan", plan], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0 and r.stdout.count("torchvision/resnet18/") == 4,
              f"gpuest-collect plan expands a plan ({r.stdout.strip()} {r.stderr.strip()})")
        client.close()


if __name__ == "__main__":
    main()
