"""A real gpuest-server on a loopback port, for the Python tests (as
tests/support/server_process does for the C++ ones).

ctest sets GPUEST_SERVER and GPUEST_MODELS to what the build made; run by hand, the
repository's build/ and models/ are used. A missing server fails the test: a skip
would let the suite pass without reaching a server.
"""
import json
import os
import subprocess
import tempfile
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER = os.environ.get("GPUEST_SERVER", os.path.join(REPO, "build", "server", "gpuest-server"))
MODELS = os.environ.get("GPUEST_MODELS", os.path.join(REPO, "models"))


class ServerProcess:
    """Starts gpuest-server (``listen`` 127.0.0.1:0 picks a port) and waits until it
    serves; ``stop()`` sends SIGTERM and checks the clean exit. Usable with ``with``.
    ``extra``: more flags; ``server``/``models``: other than ctest's (GPUEST_SERVER,
    GPUEST_MODELS) or the repository's."""

    def __init__(self, listen="127.0.0.1:0", metrics=False, ready_timeout_s=60, extra=(),
                 server=SERVER, models=MODELS):
        if not os.access(server, os.X_OK):
            raise AssertionError(f"{server} is not built (or set GPUEST_SERVER)")
        self.workdir = tempfile.mkdtemp(prefix="gpuest-py-server-")
        ready = os.path.join(self.workdir, "ready.json")
        self.log_path = os.path.join(self.workdir, "server.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [server, f"--listen={listen}",
                 "--metrics-listen=127.0.0.1:0" if metrics else "--metrics-listen=",
                 f"--models={models}", f"--ready-file={ready}", *extra],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ready_timeout_s
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise AssertionError(f"gpuest-server exited: {self.log()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"gpuest-server did not become ready: {self.log()}")
            time.sleep(0.02)
        with open(ready) as f:
            ports = json.load(f)
        self.grpc_port = ports["grpc_port"]
        self.metrics_port = ports["metrics_port"]
        self.extender_port = ports.get("extender_port", 0)
        self.target = f"127.0.0.1:{self.grpc_port}"

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=30)
        assert code == 0, f"gpuest-server exited {code}: {self.log()}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
