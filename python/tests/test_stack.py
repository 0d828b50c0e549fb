"""gpuest.stack: the one reading of a process's software stack, which the describer
records for a job and gpuest-collect context for a node; the server matches the two."""
import types

from gpuest.stack import module_loading, software_stack, stack_json


def _torch(version, cuda):
    return types.SimpleNamespace(__version__=version,
                                 version=types.SimpleNamespace(cuda=cuda))


def test_a_cuda_build_gives_its_major_and_lazy_loading_by_default(monkeypatch):
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    stack = software_stack(_torch("2.11.0+cu130", "13.0"))
    assert stack == {"torch": "2.11.0", "cuda": "13.0", "cuda_major": 13,
                     "module_loading": "LAZY"}
    assert stack_json(stack) == {"cudaMajor": 13, "cudaVersion": "13.0",
                                 "moduleLoading": "LAZY"}


def test_eager_loading_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("CUDA_MODULE_LOADING", "eager")
    assert module_loading() == "EAGER"


def test_builds_before_lazy_loading_load_eagerly(monkeypatch):
    """PyTorch sets lazy loading itself from 1.13 on CUDA 11.7; before, every module
    loads at once."""
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    assert software_stack(_torch("1.12.1+cu116", "11.6"))["module_loading"] == "EAGER"
    assert software_stack(_torch("1.13.1+cu116", "11.6"))["module_loading"] == "EAGER"
    assert software_stack(_torch("1.13.1+cu117", "11.7"))["module_loading"] == "LAZY"
    monkeypatch.setenv("CUDA_MODULE_LOADING", "lazy")
    assert software_stack(_torch("1.12.1+cu116", "11.6"))["module_loading"] == "LAZY"


def test_a_cpu_only_build_records_no_cuda(monkeypatch):
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    stack = software_stack(_torch("1.13.0a0", None))
    assert stack["cuda_major"] == 0
    assert stack_json(stack) == {"moduleLoading": "LAZY"}


def test_describe_records_the_stack():
    """A description made here carries the stack, as the proto's JSON mapping."""
    import torch

    from gpuest.describe import describe
    d = describe(torch.nn.Sequential(torch.nn.Linear(4, 2)), input_shape=[4],
                 batch_size=2, trace=False)
    assert d.stack.module_loading in ("LAZY", "EAGER")
    cuda = torch.version.cuda
    assert d.stack.cuda_major == (int(cuda.split(".")[0]) if cuda else 0)


def test_collect_context_says_why_when_no_gpu_can_be_measured():
    """`gpuest-collect context` on a machine without a GPU: exit 1 and one line why,
    never a traceback or an empty file."""
    import shutil
    import subprocess
    import sys

    import pytest
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: the command measures")
    done = subprocess.run([sys.executable, "-m", "gpuest.collect", "context"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "gpuest-collect context: cannot measure GPU 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
