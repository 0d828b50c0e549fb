#!/usr/bin/env python3
"""The gpuest job_submit plugin (integrations/slurm) on a real Slurm controller.

Starts, in a temporary directory and on free loopback ports: munged, a gpuest-server,
and Debian 12's slurmctld and slurmd (22.05) with a one-node configuration whose two
GPUs are fake device files, one shared as gres/shard (4 GiB a shard), one as gres/mps.
It submits jobs with sbatch, reads back what Slurm recorded with `scontrol show job`,
what the jobs saw in their environment from their output, and the plugin's reasons
from slurmctld's log:

  (a) a job with a good description (by path, inline, by a path full of shell
      metacharacters, on the MPS partition) gets its request from gpuest's answer;
  (b) a job that fits no GPU of its partition is rejected with the reason;
  (c) with the server down, the job goes through unchanged and the log says why; the
      next submission skips the server at once; a CLI that hangs is killed;
  (d) a bad description (bad JSON, missing file, a path outside the allowed
      directories, an oversized comment) leaves the job unchanged, with the reason.

Needs root (slurmd runs jobs as their user), and fails rather than skips when Slurm or
munge is missing: CI installs them (deploy/install-deps.sh). Every daemon it starts is
stopped on the way out, failure or not.

Usage: slurm_job_submit_test.py --source-dir DIR --server BIN --cli BIN
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

GIB = 2**30
MIB = 2**20
GIB_PER_SHARD = 4
TIMEOUT_MS = 1000
MAX_INLINE_BYTES = 65536
PLUGIN_FILES = ("job_submit.lua", "gpuest_slurm.lua", "gpuest_json.lua", "cli_filter.lua")
FREE_TEXT_FIELDS = {"Comment", "AdminComment", "Command", "WorkDir", "StdErr", "StdIn", "StdOut"}
FAILURES = []


def check(condition, message):
    print(("ok   " if condition else "FAIL ") + message, flush=True)
    if not condition:
        FAILURES.append(message)
    return condition


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")


def alive(pid):
    """Running, not a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Daemons:
    """Processes this test started, each in a session of its own, so that stopping one
    stops its children too (slurmctld's slurmscriptd, a CLI the plugin runs)."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.running = {}

    def start(self, name, argv, env=None):
        log = open(os.path.join(self.log_dir, name + ".out"), "wb")
        self.running[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                              cwd=self.log_dir, start_new_session=True)
        log.close()
        return self.running[name]

    def stop(self, name):
        process = self.running.pop(name, None)
        if process is None or process.poll() is not None:
            return
        for sig, grace_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(grace_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop_all(self):
        for name in reversed(list(self.running)):
            self.stop(name)


# --- the cluster ---------------------------------------------------------------------

def preflight():
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root: slurmd starts jobs as their user")
    for tool, package in (("slurmctld", "slurmctld"), ("slurmd", "slurmd"), ("sbatch", "slurm-client"),
                          ("scontrol", "slurm-client"), ("munged", "munge"), ("bash", "bash"),
                          ("timeout", "coreutils")):
        if not shutil.which(tool):
            problems.append(f"{tool} not found (Debian package {package}; deploy/install-deps.sh installs it)")
    if not glob.glob("/usr/lib/*/slurm-wlm/job_submit_lua.so"):
        problems.append("job_submit_lua.so not found (Debian package slurm-wlm-basic-plugins)")
    return problems


def fake_gpu(path):
    """A character device slurmd accepts as a GPU's File (a copy of /dev/null's numbers);
    where mknod is not allowed, a plain file, which slurmd logs as an error but uses."""
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        open(path, "w").close()


def write_slurm_config(tmp, conf_dir):
    host = socket.gethostname().split(".")[0]
    gpus = [os.path.join(tmp, "fake-nvidia0"), os.path.join(tmp, "fake-nvidia1")]
    for gpu in gpus:
        fake_gpu(gpu)
    for sub in ("state", "spool", "log", "jobs"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    with open(os.path.join(conf_dir, "slurm.conf"), "w") as f:
        f.write(f"""ClusterName=gpuest-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={tmp}/munge/socket
CredType=cred/munge
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
SlurmctldLogFile={tmp}/log/slurmctld.log
SlurmdLogFile={tmp}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MinJobAge=600
GresTypes=gpu,shard,mps
JobSubmitPlugins=lua
CliFilterPlugins=lua
NodeName=gpunode NodeHostname={host} NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 Gres=gpu:2,shard:10,mps:100 State=UNKNOWN
PartitionName=shards Nodes=gpunode Default=YES State=UP
PartitionName=tiny Nodes=gpunode State=UP
PartitionName=mps Nodes=gpunode State=UP
PartitionName=cpu Nodes=gpunode State=UP
""")
    with open(os.path.join(conf_dir, "gres.conf"), "w") as f:
        f.write(f"""AutoDetect=off
Name=gpu File={gpus[0]}
Name=gpu File={gpus[1]}
Name=shard Count=10 File={gpus[0]}
Name=mps Count=100 File={gpus[1]}
""")


def write_plugin_config(conf_dir, cli, port, description_dir):
    with open(os.path.join(conf_dir, "gpuest_slurm.conf"), "w") as f:
        f.write(f"""return {{
  cli = {json.dumps(cli)},
  target = "127.0.0.1:{port}",
  timeout_ms = {TIMEOUT_MS},
  skip_after_failure_s = 30,
  max_inline_bytes = {MAX_INLINE_BYTES},
  description_dirs = {{ {json.dumps(description_dir)} }},
  partitions = {{
    shards = {{ gpu = "a100-40gb", gres = "shard", gib_per_shard = {GIB_PER_SHARD}, shards_per_gpu = 10 }},
    tiny = {{ gpu = "a100-40gb", gres = "shard", gib_per_shard = {GIB_PER_SHARD}, shards_per_gpu = 2 }},
    mps = {{ gpu = "h100-80gb", gres = "mps", mps_per_gpu = 100 }},
  }},
}}
""")


def start_server(daemons, server, models, tmp):
    ready = os.path.join(tmp, "server.ready")
    daemons.start("gpuest-server", [server, "--models", models, "--listen", "127.0.0.1:0",
                                    "--metrics-listen", "", "--ready-file", ready])
    wait_for("gpuest-server", lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 60)
    with open(ready) as f:
        return json.load(f)["grpc_port"]


def start_munge(daemons, tmp):
    munge_dir = os.path.join(tmp, "munge")
    os.makedirs(munge_dir, mode=0o700)
    key = os.path.join(munge_dir, "munge.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(os.urandom(1024))
    socket_path = os.path.join(munge_dir, "socket")
    daemons.start("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                             f"--socket={socket_path}", f"--pid-file={munge_dir}/pid",
                             f"--log-file={munge_dir}/log", f"--seed-file={munge_dir}/seed"])
    wait_for("munged's socket", lambda: os.path.exists(socket_path), 20)


# --- talking to Slurm ----------------------------------------------------------------

class Slurm:
    def __init__(self, tmp, conf_dir):
        self.tmp = tmp
        self.env = dict(os.environ, SLURM_CONF=os.path.join(conf_dir, "slurm.conf"))
        self.script = os.path.join(tmp, "job.sh")
        with open(self.script, "w") as f:
            f.write("#!/bin/sh\n"
                    "env | grep -E '^(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|SLURM_SHARDS_ON_NODE)=' | sort\n")
        os.chmod(self.script, 0o755)
        self.timings = {}

    def run(self, *argv, timeout=30):
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)

    def sbatch(self, name, comment=None, partition="shards", extra=(), env=None):
        """(job id or None, sbatch's stderr); the submission's wall time is kept."""
        argv = ["sbatch", "--parsable", "-J", name, "-p", partition,
                "-o", os.path.join(self.tmp, "jobs", "%j.out"), *extra]
        if comment is not None:
            argv.append("--comment=" + comment)
        start = time.monotonic()
        result = subprocess.run([*argv, self.script], capture_output=True, text=True, timeout=30,
                                env=dict(self.env, **(env or {})))
        self.timings[name] = time.monotonic() - start
        job_id = result.stdout.strip().split(";")[0] if result.returncode == 0 else None
        return job_id, result.stderr

    def job(self, job_id):
        """`scontrol show job`'s fields. A field whose value is free text (a comment, a
        path) has a line of its own there, so such a line is one value, spaces and all."""
        result = self.run("scontrol", "show", "job", job_id)
        fields = {}
        for line in result.stdout.splitlines() if result.returncode == 0 else ():
            line = line.strip()
            key = line.split("=", 1)[0]
            if key in FREE_TEXT_FIELDS:
                fields[key] = line.split("=", 1)[1].rstrip()
                continue
            for pair in line.split():
                if "=" in pair:
                    key, value = pair.split("=", 1)
                    fields[key] = value
        return fields

    def node_state(self):
        result = self.run("scontrol", "show", "node", "gpunode")
        match = re.search(r"State=(\S+)", result.stdout)
        return match.group(1) if match else ""

    def controller_log(self):
        with open(os.path.join(self.tmp, "log", "slurmctld.log"), errors="replace") as f:
            return f.read()

    def plugin_lines(self, name):
        return [line for line in self.controller_log().splitlines()
                if f"gpuest: job '{name}' of uid" in line]

    def output(self, job_id, timeout_s=30):
        path = os.path.join(self.tmp, "jobs", f"{job_id}.out")

        def finished():
            state = self.job(job_id).get("JobState", "")
            return state in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT") and state
        state = wait_for(f"job {job_id} to finish", finished, timeout_s)
        if state != "COMPLETED" or not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()


def estimate(cli, port, description, gpu):
    """gpuest's recommendation, asked directly: what the plugin must have used."""
    result = subprocess.run([cli, "--target", f"127.0.0.1:{port}", "--json", "--gpu", gpu,
                             "estimate", description], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)["recommendation"]


# --- the cases -----------------------------------------------------------------------

def check_sized(slurm, name, job_id, tres, env_line=None):
    fields = slurm.job(job_id)
    check(fields.get("TresPerNode") == tres,
          f"{name}: Slurm recorded TresPerNode={fields.get('TresPerNode')}, gpuest's answer says {tres}")
    check(fields.get("AdminComment", "").startswith("gpuest: "),
          f"{name}: AdminComment records gpuest's answer ({fields.get('AdminComment')!r})")
    lines = slurm.plugin_lines(name)
    check(any(tres.replace("gres:", "gres/") in line for line in lines),
          f"{name}: slurmctld's log has the plugin's decision ({lines})")
    return fields


def check_unchanged(slurm, name, job_id, why_pattern, tres="(null)"):
    check(job_id is not None, f"{name}: accepted")
    if job_id is None:
        return
    fields = slurm.job(job_id)
    check(fields.get("TresPerNode", "(null)") == tres,
          f"{name}: request unchanged (TresPerNode={fields.get('TresPerNode', '(null)')}, submitted {tres})")
    check("AdminComment" not in fields or not fields["AdminComment"].startswith("gpuest"),
          f"{name}: no gpuest record on the job")
    lines = slurm.plugin_lines(name)
    check(any("left unchanged" in line and re.search(why_pattern, line) for line in lines),
          f"{name}: slurmctld's log says why (/{why_pattern}/): {lines}")


def run_cases(args, daemons, slurm, port, tmp, descriptions, conf_dir):
    cnn = os.path.join(descriptions, "cnn.json")
    with open(cnn) as f:
        cnn_text = f.read()
    inline_cnn = json.dumps(json.loads(cnn_text), separators=(",", ":"))

    on_a100 = estimate(args.cli, port, cnn, "a100-40gb")
    shards = math.ceil(int(on_a100["memoryBytes"]) / (GIB_PER_SHARD * GIB))
    on_h100 = estimate(args.cli, port, cnn, "h100-80gb")
    need, capacity = int(on_h100["memoryBytes"]), int(on_h100["fit"]["capacityBytes"])
    mps_share = math.ceil(need / capacity * 100)
    mps_limit = f"0={math.ceil(need / MIB)}M"
    print(f"gpuest: cnn.json needs {int(on_a100['memoryBytes']) / GIB:.2f} GiB on a100-40gb "
          f"({shards} shards of {GIB_PER_SHARD} GiB), {need / GIB:.2f} GiB on h100-80gb "
          f"(mps {mps_share}, limit {mps_limit})", flush=True)
    check(1 <= shards < 10, "the example fits a shard GPU with room to spare")

    # (a) sized from gpuest's answer
    ran = {}
    job, stderr = slurm.sbatch("a-path", "gpuest:" + cnn)
    if check(job is not None, f"a-path: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-path", job, f"gres:shard:{shards}")
        check("gpuest:" in stderr and f"gres/shard:{shards}" in stderr, f"a-path: sbatch tells the submitter ({stderr.strip()})")
        ran[job] = f"SLURM_SHARDS_ON_NODE={shards}"

    # Slurm refuses a comment over 1024 bytes: the plugin leaves a record in its place.
    check(len(inline_cnn) > 1024, "the inline description is longer than Slurm takes in a comment")
    job, stderr = slurm.sbatch("a-inline", "gpuest:" + inline_cnn)
    if check(job is not None, f"a-inline: accepted ({stderr.strip()})"):
        fields = check_sized(slurm, "a-inline", job, f"gres:shard:{shards}")
        check(fields.get("Comment", "").startswith(f"gpuest: inline description of {len(inline_cnn) + 7} bytes"),
              f"a-inline: the comment holds a record instead of the JSON ({fields.get('Comment', '')[:80]!r})")

    # cli_filter.lua: the submitter's file, read on the submit host, sent inline.
    job, stderr = slurm.sbatch("a-env", env={"GPUEST_DESCRIPTION": cnn})
    if check(job is not None, f"a-env: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-env", job, f"gres:shard:{shards}")

    # The daemons run in tmp: a command the name smuggled in would leave tmp/canary.
    canary = os.path.join(tmp, "canary")
    odd = os.path.join(descriptions, "cnn '$(touch canary)'; `touch canary` \"x\" $HOME.json")
    shutil.copy(cnn, odd)
    job, stderr = slurm.sbatch("a-odd-path", "gpuest:" + odd)
    if check(job is not None, f"a-odd-path: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-odd-path", job, f"gres:shard:{shards}")
    check(not os.path.exists(canary), "a-odd-path: the shell metacharacters in the path ran nothing")

    job, stderr = slurm.sbatch("a-raise", "gpuest:" + cnn, extra=["--gres=shard:1"])
    if check(job is not None, f"a-raise: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-raise", job, f"gres:shard:{shards}")

    job, stderr = slurm.sbatch("a-mps", "gpuest:" + cnn, partition="mps")
    if check(job is not None, f"a-mps: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-mps", job, f"gres:mps:{mps_share}")
        check(mps_limit in slurm.job(job).get("AdminComment", ""), f"a-mps: the MPS memory limit {mps_limit} recorded")
        ran[job] = f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={mps_limit}"

    job, stderr = slurm.sbatch("a-whole-gpu", "gpuest:" + cnn, partition="tiny")
    if check(job is not None, f"a-whole-gpu: accepted ({stderr.strip()})"):
        check_sized(slurm, "a-whole-gpu", job, "gres:gpu:1")

    job, stderr = slurm.sbatch("a-own-gpu", "gpuest:" + cnn, extra=["--gres=gpu:1"])
    if check(job is not None, f"a-own-gpu: accepted ({stderr.strip()})"):
        fields = slurm.job(job)
        check(fields.get("TresPerNode") == "gres:gpu:1", f"a-own-gpu: the job's whole GPU kept ({fields.get('TresPerNode')})")

    # (b) fits no GPU of the partition
    big = json.loads(cnn_text)
    big["batchSize"] = 128
    big_path = os.path.join(descriptions, "cnn-batch128.json")
    with open(big_path, "w") as f:
        json.dump(big, f)
    big_need = int(estimate(args.cli, port, big_path, "a100-40gb")["memoryBytes"])
    check(big_need > 40 * GIB, "the batch-128 description needs more than an A100 40GB")
    job, stderr = slurm.sbatch("b-too-big", "gpuest:" + big_path)
    check(job is None, f"b-too-big: rejected (job {job})")
    check(f"{big_need / GIB:.1f} GiB" in stderr and "partition shards" in stderr,
          f"b-too-big: sbatch shows the reason ({stderr.strip()})")
    check(slurm.run("squeue", "-h", "-n", "b-too-big").stdout.strip() == "", "b-too-big: no job queued")
    check(any("rejected" in line for line in slurm.plugin_lines("b-too-big")), "b-too-big: slurmctld's log says so")

    # (d) bad descriptions: unchanged, and the log says why
    bad = os.path.join(descriptions, "bad.json")
    with open(bad, "w") as f:
        f.write('{"layers": 5}')
    job, _ = slurm.sbatch("d-bad-json", "gpuest:" + bad)
    check_unchanged(slurm, "d-bad-json", job, "bad description: .*INVALID_ARGUMENT")
    job, _ = slurm.sbatch("d-inline-garbage", "gpuest:{this is not json")
    check_unchanged(slurm, "d-inline-garbage", job, "bad description: .*INVALID_ARGUMENT")
    job, _ = slurm.sbatch("d-missing", "gpuest:" + os.path.join(descriptions, "missing.json"),
                          extra=["--gres=shard:2"])
    check_unchanged(slurm, "d-missing", job, "bad description: .*not a regular file", tres="gres:shard:2")
    job, _ = slurm.sbatch("d-outside", "gpuest:/etc/passwd")
    check_unchanged(slurm, "d-outside", job, "bad description: the path is not under")
    job, _ = slurm.sbatch("d-huge", "gpuest:{" + " " * (MAX_INLINE_BYTES + 1000) + "}")
    check_unchanged(slurm, "d-huge", job, "over max_inline_bytes")
    job, _ = slurm.sbatch("d-env-missing", env={"GPUEST_DESCRIPTION": os.path.join(descriptions, "missing.json")})
    check(job is not None and slurm.job(job).get("TresPerNode", "(null)") == "(null)",
          "d-env-missing: a description file cli_filter cannot read: accepted as is")
    job, _ = slurm.sbatch("d-no-description", "an ordinary comment")
    check(job is not None and slurm.job(job).get("TresPerNode", "(null)") == "(null)", "d-no-description: accepted as is")
    check(slurm.plugin_lines("d-no-description") == [], "d-no-description: the plugin says nothing")
    job, _ = slurm.sbatch("d-other-partition", "gpuest:" + cnn, partition="cpu")
    check(job is not None and slurm.job(job).get("TresPerNode", "(null)") == "(null)",
          "d-other-partition: a partition the config does not map is left alone")

    # The jobs ran with what Slurm recorded.
    for job_id, expected in ran.items():
        output = slurm.output(job_id)
        check(output is not None and expected in output, f"job {job_id} saw {expected} ({output!r})")

    # (c) server down, then a CLI that hangs
    daemons.stop("gpuest-server")
    job, _ = slurm.sbatch("c-down", "gpuest:" + cnn)
    check_unchanged(slurm, "c-down", job, "gpuest unavailable at 127.0.0.1")
    check(slurm.timings["c-down"] < TIMEOUT_MS / 1000 + 3,
          f"c-down: sbatch answered in {slurm.timings['c-down']:.2f} s, within the deadline and the kill")
    job, _ = slurm.sbatch("c-skipped", "gpuest:" + cnn)
    check_unchanged(slurm, "c-skipped", job, "is skipped until")
    check(slurm.timings["c-skipped"] < TIMEOUT_MS / 1000,
          f"c-skipped: the next submission does not wait ({slurm.timings['c-skipped']:.2f} s)")

    hang_pid = os.path.join(tmp, "hang.pid")
    hang = os.path.join(tmp, "hanging-cli")
    with open(hang, "w") as f:
        f.write(f"#!/bin/sh\necho $$ > {hang_pid}\nexec sleep 120\n")
    os.chmod(hang, 0o755)
    write_plugin_config(conf_dir, hang, port, descriptions)
    job, _ = slurm.sbatch("c-hang", "gpuest:" + cnn)
    check_unchanged(slurm, "c-hang", job, r"no answer in 1\.500 s: killed")
    if check(os.path.exists(hang_pid), "c-hang: the plugin ran the hanging CLI"):
        with open(hang_pid) as f:
            pid = int(f.read())
        check(wait_for("the hanging CLI to die", lambda: not alive(pid), 10), "c-hang: the hanging CLI was killed")

    # A broken gpuest_slurm.conf is the plugin's error, not the job's.
    with open(os.path.join(conf_dir, "gpuest_slurm.conf"), "w") as f:
        f.write("return { partitions = { shards = { gpu = 'a100-40gb', gres = 'shard' } } }\n")
    job, stderr = slurm.sbatch("c-bad-config", "gpuest:" + cnn)
    check(job is not None and slurm.job(job).get("TresPerNode", "(null)") == "(null)",
          f"c-bad-config: accepted unchanged ({stderr.strip()})")
    check(re.search(r"error: lua: gpuest: bad configuration: .*gib_per_shard.*the job is left unchanged",
                    slurm.controller_log()) is not None, "c-bad-config: slurmctld's log names the configuration error")


def report_timings(slurm):
    print("\nsbatch wall time per submission (client, controller, plugin and gpuest):")
    for name, seconds in slurm.timings.items():
        print(f"  {name:20s} {seconds * 1000:7.1f} ms")
    calls = [float(m) for m in re.findall(r"\[gpuest ([0-9.]+) ms\]", slurm.controller_log())]
    if calls:
        calls.sort()
        print(f"gpuest CLI calls from the plugin ({len(calls)}): median {calls[len(calls) // 2]:.1f} ms, "
              f"max {calls[-1]:.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    args.cli, args.server = os.path.abspath(args.cli), os.path.abspath(args.server)
    args.source_dir = os.path.abspath(args.source_dir)

    problems = preflight()
    if problems:
        for problem in problems:
            print("FAIL " + problem)
        return 1

    # ctest's timeout sends SIGTERM: stop the daemons on the way out all the same.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tmp = tempfile.mkdtemp(prefix="gpuest-slurm-test-")
    os.chmod(tmp, 0o755)
    daemons = Daemons(tmp)
    slurm = None
    try:
        conf_dir = os.path.join(tmp, "etc")
        descriptions = os.path.join(tmp, "descriptions")
        os.makedirs(conf_dir)
        os.makedirs(descriptions)
        shutil.copy(os.path.join(args.source_dir, "examples", "cnn.json"), descriptions)

        port = start_server(daemons, args.server, os.path.join(args.source_dir, "models"), tmp)
        start_munge(daemons, tmp)
        write_slurm_config(tmp, conf_dir)
        for name in PLUGIN_FILES:
            shutil.copy(os.path.join(args.source_dir, "integrations", "slurm", name), conf_dir)
        write_plugin_config(conf_dir, args.cli, port, descriptions)

        slurm = Slurm(tmp, conf_dir)
        daemons.start("slurmctld", ["slurmctld", "-D", "-f", slurm.env["SLURM_CONF"]], env=slurm.env)
        daemons.start("slurmd", ["slurmd", "-D", "-N", "gpunode", "-f", slurm.env["SLURM_CONF"]], env=slurm.env)
        wait_for("gpunode to be IDLE", lambda: slurm.node_state().startswith("IDLE"), 60)
        version = slurm.run("sinfo", "--version").stdout.strip()
        print(f"{version}: slurmctld and slurmd up in {tmp}", flush=True)

        run_cases(args, daemons, slurm, port, tmp, descriptions, conf_dir)
        report_timings(slurm)
    except Exception as error:  # a daemon that would not start, a step that timed out
        check(False, f"{type(error).__name__}: {error}")
    finally:
        if slurm is not None:
            slurm.run("scancel", "--full", "-u", "root")
        daemons.stop_all()
        if FAILURES:
            for log in ("log/slurmctld.log", "log/slurmd.log", "slurmctld.out", "gpuest-server.out"):
                path = os.path.join(tmp, log)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        print(f"--- {log} (last 40 lines)\n" + "".join(f.readlines()[-40:]))
        if args.keep:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n{len(FAILURES)} failure(s)" if FAILURES else "\nall passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
