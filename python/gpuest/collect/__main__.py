"""gpuest-collect (python3 -m gpuest.collect): measure training jobs on a GPU node.

    run PLAN --out DIR [--dry-run]   run the plan's jobs one at a time (then its pairs),
                                     appending each finished row to DIR/rows.jsonl, then
                                     write the cleaned files; a restart skips finished jobs
    plan PLAN                        check a plan and list its job ids
    clean DIR                        rewrite DIR's cleaned files from DIR/rows.jsonl
    compare DIR                      the run's fp32 rows beside the A100's timm rows
    calibrate DIR --gpu ID           set that GPU's context in models/gpu_profiles.json
                                     from DIR/measurements.csv
    context [--out FILE]             measure this node's context on its own stack (about
                                     30 s), for gpuest-server's --contexts directory
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import sys
import time

from . import clean as cleaner
from .plan import PlanError, load_plan, self_contained
from .runner import RESULT_PREFIX, NodeUnusable, RunOptions, run_job, run_pair
from .store import RowStore, StoreError

ROWS = "rows.jsonl"
RUN_INFO = "run.json"  # what kind of run wrote DIR: a dry run's rows are not a GPU's

EPILOG = """\
DIR gets rows.jsonl (every finished job, appended and fsync'd as it finishes: kill the
collector at any time and run the same command again to go on), measurements.csv (the
timm dataset's columns first, then the collector's), colocation.csv (pairs, Lucid's
columns first) and exported.jsonl (measured rows with their traced descriptions, for
gpuest-calibrate-memory and gpuest-replay-dump). --dry-run runs everything on the CPU
(one step per job, no GPU measurement: status DRY_RUN). See docs/collector.md.

exit status: 0 done (failed jobs are rows with their status), 1 interrupted or a
rows file in the way, 2 bad arguments or plan."""


class Interrupted(Exception):
    pass


def _parser():
    p = argparse.ArgumentParser(prog="gpuest-collect", description=__doc__.split("\n\n")[0],
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a plan's jobs (resumable)")
    r.add_argument("plan", help="the YAML plan (docs/collector.md)")
    r.add_argument("--out", required=True, metavar="DIR", help="where rows and CSVs go")
    r.add_argument("--dry-run", action="store_true",
                   help="on the CPU: build, describe and run one step of each job; no GPU")
    r.add_argument("--gpu", type=int, default=0, metavar="INDEX",
                   help="the GPU to run on, as nvidia-smi numbers them (default 0)")
    r.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only the jobs (and pairs) whose id contains TEXT; repeat for "
                        "several (any of them)")
    r.add_argument("--limit", type=int, default=0, metavar="N",
                   help="stop after N jobs run by this invocation (0: all)")
    r.add_argument("--timm-src", default=None, metavar="DIR",
                   help="the folder holding the timm/ package (extracted from "
                        "../shared/vendor/timm-src-*.tar.gz); default $GPUEST_TIMM_SRC")
    r.add_argument("--child-memory-limit-mb", type=int, default=0, metavar="MB",
                   help="limit each child's address space (0: none)")
    r.add_argument("--no-pairs", dest="pairs", action="store_false",
                   help="skip the plan's pairs")
    pl = sub.add_parser("plan", help="check a plan and list its jobs")
    pl.add_argument("plan")
    pl.add_argument("--json", action="store_true",
                    help="print the plan as self-contained JSON (csv entries written "
                         "out per model) for a node without PyYAML or ../shared")
    c = sub.add_parser("clean", help="rewrite the cleaned files of a run")
    c.add_argument("dir")
    cmp_ = sub.add_parser("compare", help="a run's fp32 rows beside the A100's")
    cmp_.add_argument("dir")
    cmp_.add_argument("--reference", default="../shared/data/timm/timm_a100.csv",
                      help="a measured CSV of the shared datasets' schema (default: the "
                           "A100's timm rows)")
    sub.add_parser("context", add_help=False,
                   help="measure this node's context (gpuest-collect context --help)")
    cal = sub.add_parser("calibrate", help="calibrate a GPU's context from a run's rows")
    cal.add_argument("dir")
    cal.add_argument("--gpu", required=True, metavar="ID",
                     help="the GPU's id in gpu_profiles.json (h100-80gb, h200, ...)")
    cal.add_argument("--profiles", default="models/gpu_profiles.json")
    return p


def _log(text: str) -> None:
    print(f"gpuest-collect: {text}", file=sys.stderr, flush=True)


def _check_run_kind(out: str, dry_run: bool) -> None:
    """One kind of run per DIR: a restart in GPU mode must not skip jobs that only a
    dry run finished."""
    path = os.path.join(out, RUN_INFO)
    kind = {"dry_run": dry_run}
    if os.path.exists(path):
        with open(path) as f:
            before = json.load(f)
        if before.get("dry_run") != dry_run:
            raise StoreError(f"{out} holds the rows of a {'dry' if before['dry_run'] else 'GPU'}"
                             f" run; give this {'dry' if dry_run else 'GPU'} run another --out")
        return
    with open(path, "w") as f:
        json.dump(kind, f)
        f.write("\n")


def _lock(out: str):
    f = open(os.path.join(out, ".lock"), "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise StoreError(f"another collector is running on {out}") from None
    return f


def _remove_stale_results(out: str) -> None:
    """Result files of children a killed collector left behind (under the lock, no
    child of another collector can be writing them)."""
    for name in os.listdir(out):
        if name.startswith(RESULT_PREFIX):
            os.remove(os.path.join(out, name))


def _on_sigterm(signum, frame):
    raise Interrupted(f"signal {signal.Signals(signum).name}")


def run(args) -> int:
    from .zoo import TIMM_SOURCE_ENV, ModelUnavailable, timm_source
    if args.timm_src:
        os.environ[TIMM_SOURCE_ENV] = os.path.abspath(args.timm_src)
    if not args.dry_run and not _has_gpu():
        _log("no nvidia-smi here: run on a GPU node, or pass --dry-run")
        return 2
    plan = load_plan(args.plan)
    if any(j.source == "timm" for j in plan.jobs):
        try:
            timm_source()
        except ModelUnavailable as e:
            _log(f"the plan has timm jobs: {e}")
            return 2
    os.makedirs(args.out, exist_ok=True)
    lock = _lock(args.out)
    _check_run_kind(args.out, args.dry_run)
    _remove_stale_results(args.out)
    store = RowStore(os.path.join(args.out, ROWS))
    options = RunOptions(dry_run=args.dry_run, gpu_index=args.gpu,
                         child_memory_limit_mb=args.child_memory_limit_mb,
                         work_dir=args.out)
    jobs = [j for j in plan.jobs if _selected(j.id, args.only)]
    todo = [j for j in jobs if not store.finished(j.id)]
    _log(f"{len(jobs)} jobs, {len(jobs) - len(todo)} already finished in {args.out}; "
         f"{'dry run on the CPU' if args.dry_run else f'GPU {args.gpu}'}")
    signal.signal(signal.SIGTERM, _on_sigterm)
    ran = 0
    try:
        for n, job in enumerate(todo, 1):
            if args.limit and ran >= args.limit:
                break
            started = time.perf_counter()
            row = run_job(job, options)
            store.append(row)
            ran += 1
            _log(f"[{n}/{len(todo)}] {job.id}: {row['status']}"
                 f"{' (' + row['error'].splitlines()[-1] + ')' if row['error'] else ''}, "
                 f"{time.perf_counter() - started:.1f} s")
        if args.pairs and not (args.limit and ran >= args.limit):
            for pair in plan.pairs:
                if store.finished(pair.id) or not _selected(pair.id, args.only):
                    continue
                alone = [store.get(j.id) if store.finished(j.id) else None
                         for j in (pair.first, pair.second)]
                if any(a is None or a["status"] not in ("OK", "DRY_RUN") for a in alone):
                    _log(f"{pair.id}: skipped, both jobs need a finished run alone first")
                    continue
                row = run_pair(pair, alone, options)
                store.append(row)
                _log(f"{pair.id}: {row['status']}, speeds {row['speeds']}")
    except NodeUnusable as e:
        _log(f"stopped: this node cannot run jobs ({e}); {len(store)} finished rows kept")
        return 1
    except (Interrupted, KeyboardInterrupt) as e:
        _log(f"interrupted ({e or 'SIGINT'}): {len(store)} finished rows kept in "
             f"{store.path}; run the same command to go on")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        lock.close()
    counts = cleaner.clean(store.rows(), args.out)
    _log(f"wrote {', '.join(f'{k} ({v} rows)' for k, v in counts.items())} in {args.out}")
    return 0


def _selected(row_id: str, only) -> bool:
    return not only or any(text in row_id for text in only)


def _has_gpu() -> bool:
    from .monitor import nvidia_smi
    return nvidia_smi() is not None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["context"]:  # its own flags: gpuest.collect.context
        from . import context
        return context.main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return run(args)
        if args.command == "plan":
            plan = load_plan(args.plan)
            if args.json:  # for a node without PyYAML or ../shared (JSON is YAML too)
                import yaml
                with open(args.plan) as f:
                    json.dump(self_contained(yaml.safe_load(f)), sys.stdout, indent=1)
                print()
                return 0
            for j in plan.jobs:
                print(j.id)
            for p in plan.pairs:
                print(p.id)
            _log(f"{len(plan.jobs)} jobs, {len(plan.pairs)} pairs")
            return 0
        if args.command == "clean":
            counts = cleaner.clean(RowStore(os.path.join(args.dir, ROWS)).rows(), args.dir)
            _log(", ".join(f"{k}: {v} rows" for k, v in counts.items()))
            return 0
        if args.command == "compare":
            from .compare import CompareError, compare
            try:
                sys.stdout.write(compare(os.path.join(args.dir, "measurements.csv"),
                                         args.reference))
            except (CompareError, cleaner.TableError) as e:
                _log(str(e))
                return 2
            return 0
        if args.command == "calibrate":
            from .calibrate import CalibrationError, calibrate_context
            try:
                rows = cleaner.read_table(os.path.join(args.dir, "measurements.csv"))
                got = calibrate_context(rows, args.profiles, args.gpu, args.dir)
            except (CalibrationError, cleaner.TableError) as e:
                _log(str(e))
                return 2
            _log(f"{args.profiles}: {got['gpu']} ({got['name']}) context {got['context_mib']}"
                 f" MiB from {got['rows']} rows ({got['min_mib']:.0f}..{got['max_mib']:.0f})")
            return 0
    except PlanError as e:
        _log(str(e))
        return 2
    except StoreError as e:
        _log(str(e))
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
