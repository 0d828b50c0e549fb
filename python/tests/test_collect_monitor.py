"""gpuest.collect.monitor's readers of nvidia-smi's and dcgmi's output (the rest of
the monitor needs a GPU: docs/collector.md)."""
from gpuest.collect.monitor import DCGM_FIELDS, parse_csv_lines, parse_dcgmi_dmon

# `dcgmi dmon -e 1002,1003,1005` as DCGM 3 prints it: a header, the id line, then one
# line per sample; N/A until the profiling fields have a value.
DCGMI = """\
#Entity   SMACT        SMOCC        DRAMA
ID
GPU 0     N/A          N/A          N/A
GPU 0     0.912        0.455        0.387
GPU 0     0.000        0.000        0.001
"""


def test_dcgmi_dmon_lines():
    values = [v for v in map(parse_dcgmi_dmon, DCGMI.splitlines()) if v is not None]
    assert values == [[0.912, 0.455, 0.387], [0.0, 0.0, 0.001]]
    assert all(len(v) == len(DCGM_FIELDS) for v in values)
    assert list(DCGM_FIELDS) == ["smact", "smocc", "drama"]


def test_nvidia_smi_csv_lines():
    # --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader,nounits
    text = "NVIDIA H200, 143771, 4, 550.54.15\nNVIDIA H200, 143771, 0, 550.54.15\n\n"
    assert parse_csv_lines(text) == [["NVIDIA H200", "143771", "4", "550.54.15"],
                                     ["NVIDIA H200", "143771", "0", "550.54.15"]]
