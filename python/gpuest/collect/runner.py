"""Runs one job, or one pair of jobs, in child processes and makes the finished row.

The child (``gpuest.collect.child``) trains; the collector watches it from outside
(``monitor.Sampler``: what nvidia-smi and DCGM show) and waits at most the job's
timeout. Whatever happens, the job ends as a row: OK, OOM (the job ran out of GPU
memory), ERROR (an exception: the model cannot be built, a bad input), CRASH (the
child died: a signal, an exit without a result), TIMEOUT (killed past its timeout), or
DRY_RUN (ran on the CPU; nothing measured on a GPU).
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

from . import monitor
from .child import NODE_UNUSABLE
from .plan import Job, Pair

RESULT_PREFIX = "gpuest-job-"  # a child's result file, in the run's directory
STATUSES = ("OK", "OOM", "ERROR", "CRASH", "TIMEOUT", "DRY_RUN")
_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class NodeUnusable(RuntimeError):
    """The node cannot run jobs (the child found no CUDA device): stop, file no row."""


class RunOptions:
    def __init__(self, dry_run=False, gpu_index=0, child_memory_limit_mb=0,
                 work_dir: Optional[str] = None, sample_interval_s=0.2):
        self.dry_run = dry_run
        self.gpu_index = gpu_index
        # A limit on the child's address space (RLIMIT_AS): keeps a runaway job from
        # taking the node's host memory; a dry run under it meets a real CPU OOM.
        self.child_memory_limit_mb = child_memory_limit_mb
        self.work_dir = work_dir or tempfile.gettempdir()
        self.sample_interval_s = sample_interval_s


class _Child:
    """One started child, its result file and (on a GPU) its sampler."""

    def __init__(self, job: Job, options: RunOptions):
        self.job = job
        fd, self.result_path = tempfile.mkstemp(prefix=RESULT_PREFIX, suffix=".json",
                                                dir=options.work_dir)
        os.close(fd)
        os.remove(self.result_path)
        cmd = [sys.executable, "-m", "gpuest.collect.child", "--job",
               json.dumps(job.to_json()), "--result", self.result_path]
        if options.dry_run:
            cmd.append("--dry-run")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_PYTHON_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        if not options.dry_run:  # CUDA numbers the cards as nvidia-smi does
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = str(options.gpu_index)
        limit = options.child_memory_limit_mb

        def limit_memory():
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit << 20, limit << 20))

        self.started = time.time()
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=limit_memory)
        self.sampler = None
        self.monitor_error = ""
        if not options.dry_run:
            try:
                self.sampler = monitor.Sampler(options.gpu_index, self.proc.pid,
                                               self.result_path + ".measuring",
                                               options.sample_interval_s)
            except monitor.MONITOR_ERRORS as e:  # the job runs; its row says why
                self.monitor_error = f"nvidia-smi: {type(e).__name__}: {e}"

    def wait(self) -> dict:
        """The child's finished row; kills it past the job's timeout."""
        timed_out = False
        try:
            _, stderr = self.proc.communicate(timeout=self.job.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.proc.kill()
            _, stderr = self.proc.communicate()
        seen = self.sampler.stop() if self.sampler else {}
        if self.monitor_error:
            seen["monitor_errors"] = [self.monitor_error]
        result = {}
        if os.path.exists(self.result_path):
            with open(self.result_path) as f:
                result = json.load(f)
        self._remove_files()
        status = result.get("status")
        if timed_out:
            status = "TIMEOUT"
            result["error"] = (f"killed after the job's timeout of {self.job.timeout_s:g} s "
                               f"(stage {result.get('stage', 'start')})")
        elif status is None:
            code = self.proc.returncode
            if code == NODE_UNUSABLE:
                raise NodeUnusable((stderr or "").strip()[-500:])
            status = "CRASH"
            how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0
                   else f"exited with status {code}")
            result["error"] = f"the child {how} at stage {result.get('stage', 'start')}"
        if status not in ("OK", "DRY_RUN") and stderr:
            result["stderr_tail"] = stderr[-2000:]
        measurement = dict(result.get("measurement") or {})
        measurement.update(seen)
        return {
            "id": self.job.id, "kind": "job", "job": self.job.to_json(), "status": status,
            "error": result.get("error", ""), "stderr_tail": result.get("stderr_tail", ""),
            "started_at": round(self.started, 3),
            "wall_seconds": round(time.time() - self.started, 3),
            "input_shape": result.get("input_shape") or
            (list(self.job.input_shape) if self.job.input_shape else None),
            "versions": result.get("versions", {}),
            "measurement": measurement,
            "description": result.get("description"),
            "describe_error": result.get("describe_error", ""),
        }

    def _remove_files(self):
        for path in (self.result_path, self.result_path + ".tmp",
                     self.result_path + ".measuring"):
            if os.path.exists(path):
                os.remove(path)

    def kill(self):
        """Stops the child if it still runs (the collector was interrupted)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self._remove_files()
        if self.sampler:
            self.sampler.stop()


def gpu_row_fields(options: RunOptions) -> dict:
    """The card and driver every row of this run records."""
    if options.dry_run:
        return {"gpu_name": "none (dry run on the CPU)", "gpu_memory_mib": None,
                "driver": ""}
    try:
        info = monitor.gpu_info(options.gpu_index)
    except monitor.MONITOR_ERRORS as e:
        return {"gpu_name": f"unknown (nvidia-smi: {type(e).__name__}: {e})",
                "gpu_memory_mib": None, "driver": ""}
    info.pop("used_mib")
    return info


def run_job(job: Job, options: RunOptions) -> dict:
    """Runs ``job`` alone in a child process; always returns its row."""
    child = _Child(job, options)
    try:
        row = child.wait()
    finally:
        child.kill()  # a no-op after wait; on an interrupt, no orphan keeps the GPU
    row.update(gpu_row_fields(options))
    return row


def run_pair(pair: Pair, alone: List[dict], options: RunOptions) -> dict:
    """Runs both jobs of ``pair`` at once for ``pair.seconds`` and records each one's
    speed beside the other over its speed alone (``alone``: their single rows), in the
    shape of Lucid's colocation.csv."""
    jobs = [_timed(pair.first, pair.seconds), _timed(pair.second, pair.seconds)]
    children = [_Child(j, options) for j in jobs]
    try:
        rows = [c.wait() for c in children]
    finally:
        for c in children:
            c.kill()
    speeds = []
    for row, single in zip(rows, alone):
        together = row["measurement"].get("samples_per_s")
        by_itself = single["measurement"].get("samples_per_s")
        speeds.append(round(together / by_itself, 4) if together and by_itself else None)
    bad = [r for r in rows if r["status"] not in ("OK", "DRY_RUN")]
    status = bad[0]["status"] if bad else rows[0]["status"]
    util = [r["measurement"] for r in rows]
    return {
        "id": pair.id, "kind": "pair", "status": status,
        "error": "; ".join(f"{r['id']}: {r['error']}" for r in bad),
        "jobs": [pair.first.to_json(), pair.second.to_json()],
        "speeds": speeds, "together": [r["measurement"] for r in rows],
        # One GPU, both samplers watched it: their averages agree but for timing.
        "gpu_util": _mean([u.get("gpu_util") for u in util]),
        "gmem_util": _mean([u.get("gmem_util") for u in util]),
        "versions": rows[0]["versions"], **gpu_row_fields(options),
    }


def _timed(job: Job, seconds: float) -> Job:
    """The job run for ``seconds`` (its steps made unbounded), so both overlap."""
    return Job.from_json({**job.to_json(), "steps": 10 ** 9, "seconds": seconds,
                          "timeout_s": job.timeout_s + seconds})


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None
