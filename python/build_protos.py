"""Generates the package's protobuf and gRPC modules from the repository's proto/.

    build_protos.py OUT_DIR [--proto-dir DIR]

writes, under OUT_DIR:

- gpuest/v1/*_pb2.py, *_pb2.pyi and *_pb2_grpc.py for every proto/gpuest/v1/*.proto
  (protoc with Debian's grpc_python_plugin), so a service added there (placement,
  admin) reaches Python without a change here;
- gpuest/v1/__init__.py, naming every message, enum and service stub of those files,
  so ``gpuest.v1.ModelDescription`` is the message;
- gpuest/v1/layer_types.json, the layer-type table the describer reads (the server
  embeds the same file), and gpuest/v1/client_policy.json, the deadline and retry
  policy gpuest.Client applies (the C++ client embeds the same file);
- gpuest/_health_pb2.py(i): grpc.health.v1's two messages under a private proto
  package. The call goes to /grpc.health.v1.Health/Check as the standard says; only
  the messages' registered names differ, so the package never clashes with
  grpcio-health-checking in the process-wide descriptor pool;
- gpuest/_rpc_pb2.py(i): google.rpc's Status and BadRequest (proto/google/rpc), the
  server's field errors in rich error details, under a private package for the same
  reason (googleapis-common-protos).

setup.py runs it when a wheel is built; CMake runs it into build/python for the tests
in the checkout (gpuest/__init__.py extends its path there). Nothing generated is
checked in.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

HERE = Path(__file__).resolve().parent
DEFAULT_PROTO_DIR = HERE.parent / "proto"
HEALTH_PACKAGE = "gpuest.internal.health.v1"
RPC_PACKAGE = "gpuest.internal.rpc"


def _tool(name: str, env: str) -> str:
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise SystemExit(f"build_protos: {name} not found (Debian: apt-get install "
                         f"protobuf-compiler protobuf-compiler-grpc; or set {env})")
    return path


def _protoc(include: Path, out: Path, protos: List[Path], grpc: bool) -> None:
    cmd = [_tool("protoc", "PROTOC"), f"-I{include}", f"--python_out={out}", f"--pyi_out={out}"]
    if grpc:
        plugin = _tool("grpc_python_plugin", "GRPC_PYTHON_PLUGIN")
        cmd += [f"--plugin=protoc-gen-grpc_python={plugin}", f"--grpc_python_out={out}"]
    subprocess.run(cmd + [str(p) for p in protos], check=True)


def _public_names(include: Path, protos: List[Path]) -> List[tuple]:
    """(module, name) of every top-level message, enum, enum value and service stub,
    read from protoc's descriptor set (no generated code is imported)."""
    from google.protobuf import descriptor_pb2
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        subprocess.run([_tool("protoc", "PROTOC"), f"-I{include}",
                        f"--descriptor_set_out={out}"] + [str(p) for p in protos], check=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    names = []
    for f in fds.file:
        module = Path(f.name).stem + "_pb2"
        names += [(module, m.name) for m in f.message_type]
        for e in f.enum_type:
            names.append((module, e.name))
            names += [(module, v.name) for v in e.value]
        names += [(module + "_grpc", s.name + "Stub") for s in f.service]
    return names


def _write_init(path: Path, names: List[tuple]) -> None:
    lines = ['"""gpuest.v1, generated from proto/gpuest/v1 by build_protos.py: do not edit."""']
    modules = sorted({m for m, _ in names})
    for module in modules:
        members = sorted(n for m, n in names if m == module)
        lines.append(f"from .{module} import (  # noqa: F401")
        lines += [f"    {n} as {n}," for n in members]
        lines.append(")")
    lines.append("")
    lines.append("__all__ = [")
    lines += [f'    "{n}",' for _, n in sorted(names, key=lambda x: x[1])]
    lines.append("]")
    path.write_text("\n".join(lines) + "\n")


def _private(source_path: Path, package: str, private: str, module: str, out: Path) -> None:
    """The messages of source_path, whose proto package is `package`, generated as
    gpuest/<module>_pb2.py under the proto package `private`."""
    source = source_path.read_text()
    renamed = source.replace(f"package {package};", f"package {private};")
    if renamed == source:
        raise SystemExit(f"build_protos: {source_path} no longer declares package {package}")
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "gpuest" / f"{module}.proto"
        staged.parent.mkdir()
        staged.write_text(renamed)
        _protoc(Path(tmp), out, [staged], grpc=False)


def _health(proto_dir: Path, out: Path) -> None:
    _private(proto_dir / "grpc" / "health" / "v1" / "health.proto", "grpc.health.v1",
             HEALTH_PACKAGE, "_health", out)


def _rpc(proto_dir: Path, out: Path) -> None:
    _private(proto_dir / "google" / "rpc" / "bad_request.proto", "google.rpc", RPC_PACKAGE,
             "_rpc", out)


def generate(out: Path, proto_dir: Path = DEFAULT_PROTO_DIR) -> None:
    protos = sorted((proto_dir / "gpuest" / "v1").glob("*.proto"))
    if not protos:
        raise SystemExit(f"build_protos: no .proto files in {proto_dir / 'gpuest' / 'v1'} "
                         "(build from the repository's clone: python/ beside proto/)")
    v1 = out / "gpuest" / "v1"
    v1.mkdir(parents=True, exist_ok=True)
    for stale in v1.glob("*_pb2*.py*"):  # a proto removed upstream leaves no module behind
        stale.unlink()
    _protoc(proto_dir, out, protos, grpc=True)
    _write_init(v1 / "__init__.py", _public_names(proto_dir, protos))
    for shared in ("layer_types.json", "client_policy.json"):
        shutil.copyfile(proto_dir / "gpuest" / "v1" / shared, v1 / shared)
    _health(proto_dir, out)
    _rpc(proto_dir, out)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="directory that receives gpuest/v1/...")
    p.add_argument("--proto-dir", type=Path, default=DEFAULT_PROTO_DIR)
    args = p.parse_args(argv)
    generate(args.out, args.proto_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
