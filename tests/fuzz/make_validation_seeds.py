#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/request_validation/: binary EstimateRequests (what the
server receives) made from the JSON examples. Run again when the examples or
proto/gpuest/v1 change:  /usr/bin/python3 tests/fuzz/make_validation_seeds.py
Needs protoc and python3-protobuf (the messages are compiled from the .proto files at
run time, so nothing generated is kept)."""
import glob
import os
import subprocess
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus", "request_validation")

with tempfile.TemporaryDirectory() as tmp:
    descriptors = os.path.join(tmp, "d.pb")
    subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "--include_imports",
                    "--descriptor_set_out=" + descriptors, "gpuest/v1/estimate.proto"],
                   check=True)
    files = descriptor_pb2.FileDescriptorSet.FromString(open(descriptors, "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in files.file:
    pool.Add(f)
Request = message_factory.MessageFactory(pool).GetPrototype(
    pool.FindMessageTypeByName("gpuest.v1.EstimateRequest"))

sources = sorted(glob.glob(os.path.join(ROOT, "examples", "*.json"))) + [
    os.path.join(ROOT, "tests", "data", "traces", "lstm_lm_b64.json")]
for path in sources:
    request = Request()
    json_format.Parse(open(path).read(), request.model)
    request.gpu = "a100-40gb"
    name = os.path.splitext(os.path.basename(path))[0]
    with open(os.path.join(OUT, name + ".bin"), "wb") as out:
        out.write(request.SerializeToString())
# A features-only request.
request = Request()
request.features.batch_size = 32
request.features.total_parameters = 25000000
request.features.total_activations = 10000000
with open(os.path.join(OUT, "features.bin"), "wb") as out:
    out.write(request.SerializeToString())
