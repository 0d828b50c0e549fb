"""What the GPU shows from outside the job: the card (nvidia-smi), the process's
memory as a scheduler sees it (nvidia-smi's per-process used memory, from NVML), and
utilization (DCGM's SMACT, SMOCC and DRAMA through ``dcgmi dmon`` when dcgmi is
installed, else nvidia-smi's utilization.gpu and utilization.memory).

A ``Sampler`` runs in the collector, beside the child that trains, and samples every
``interval_s``; utilization counts only while the child says it is measuring (a
marker file), so model building and describing do not dilute the averages.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from typing import Dict, List, Optional

# DCGM profiling fields: SM active, SM occupancy, DRAM active (dcgmi dmon -e).
DCGM_FIELDS = {"smact": 1002, "smocc": 1003, "drama": 1005}
_QUERY_TIMEOUT_S = 10
# What a failed or unexpected nvidia-smi query raises.
MONITOR_ERRORS = (subprocess.SubprocessError, OSError, ValueError, IndexError)


def nvidia_smi() -> Optional[str]:
    return shutil.which("nvidia-smi")


def _query(args: List[str]) -> List[List[str]]:
    if nvidia_smi() is None:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    out = subprocess.run([nvidia_smi(), *args, "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=_QUERY_TIMEOUT_S, check=True)
    return parse_csv_lines(out.stdout)


def parse_csv_lines(text: str) -> List[List[str]]:
    """nvidia-smi's ``--format=csv,noheader,nounits`` output as fields per line."""
    return [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.strip()]


def gpu_info(index: int) -> Dict[str, object]:
    """The card's name, total memory (MiB), driver version and what is in use now."""
    rows = _query([f"--id={index}",
                   "--query-gpu=name,memory.total,memory.used,driver_version"])
    name, total, used, driver = rows[0]
    return {"gpu_name": name, "gpu_memory_mib": float(total), "used_mib": float(used),
            "driver": driver}


def parse_dcgmi_dmon(line: str) -> Optional[List[float]]:
    """The values of one ``dcgmi dmon`` data line (``GPU 0  0.512  0.250  0.031``);
    None for headers and for lines whose fields are not measured (``N/A``)."""
    parts = line.split()
    if len(parts) < 3 or parts[0] != "GPU":
        return None
    try:
        return [float(x) for x in parts[2:]]
    except ValueError:
        return None


class Sampler:
    """Samples one GPU while a child process runs; ``stop()`` returns the summary."""

    def __init__(self, index: int, pid: int, measuring_marker: str, interval_s=0.2):
        self.index, self.pid, self.marker, self.interval_s = index, pid, measuring_marker, \
            interval_s
        self.baseline_mib = gpu_info(index)["used_mib"]
        self.process_mib = 0.0      # the child's peak per NVML (nvidia-smi compute apps)
        self.device_mib = 0.0       # peak card use above what was used before the child
        self.util: Dict[str, List[float]] = {"gpu_util": [], "gmem_util": []}
        self.dcgm: Dict[str, List[float]] = {k: [] for k in DCGM_FIELDS}
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._smi_loop, daemon=True)]
        self._dcgmi = None
        if shutil.which("dcgmi"):
            self._dcgmi = subprocess.Popen(
                ["dcgmi", "dmon", "-i", str(index), "-d", str(int(interval_s * 1000)),
                 "-e", ",".join(str(f) for f in DCGM_FIELDS.values())],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._threads.append(threading.Thread(target=self._dcgmi_loop, daemon=True))
        for t in self._threads:
            t.start()

    def _measuring(self) -> bool:
        return os.path.exists(self.marker)

    def _smi_loop(self):
        while not self._stop.wait(self.interval_s):
            try:
                for pid, used in _query(["--query-compute-apps=pid,used_memory"]):
                    if pid.isdigit() and int(pid) == self.pid and used.isdigit():
                        self.process_mib = max(self.process_mib, float(used))
                util_gpu, util_mem, used = _query(
                    [f"--id={self.index}",
                     "--query-gpu=utilization.gpu,utilization.memory,memory.used"])[0]
                self.device_mib = max(self.device_mib, float(used) - self.baseline_mib)
                if self._measuring():
                    self.util["gpu_util"].append(float(util_gpu))
                    self.util["gmem_util"].append(float(util_mem))
            except MONITOR_ERRORS as e:
                if len(self.errors) < 5:
                    self.errors.append(f"nvidia-smi: {type(e).__name__}: {e}")

    def _dcgmi_loop(self):
        for line in self._dcgmi.stdout:
            values = parse_dcgmi_dmon(line)
            if values is not None and len(values) == len(DCGM_FIELDS) and self._measuring():
                for k, v in zip(DCGM_FIELDS, values):
                    self.dcgm[k].append(v)
            if self._stop.is_set():
                break

    def stop(self) -> Dict[str, object]:
        self._stop.set()
        if self._dcgmi is not None:
            self._dcgmi.terminate()
            try:
                self._dcgmi.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._dcgmi.kill()
        for t in self._threads:
            t.join(timeout=_QUERY_TIMEOUT_S)
        out: Dict[str, object] = {
            "smi_process_mib": self.process_mib or None,
            "smi_device_mib": self.device_mib or None,
            "utilization_source": "dcgmi" if any(self.dcgm.values()) else "nvidia-smi",
            "utilization_samples": len(self.util["gpu_util"]),
        }
        for k, values in {**self.util, **self.dcgm}.items():
            out[k] = sum(values) / len(values) if values else None
        if self.errors:
            out["monitor_errors"] = self.errors
        return out
