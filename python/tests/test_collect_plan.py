"""gpuest.collect's plan: YAML validation (errors name the key), deterministic
expansion with stable ids, the timm CSV as a plan, and the example plan."""
import copy
import json
import csv
import os

import pytest
import yaml

from conftest import measured_path, read_csv
from gpuest.collect.plan import PlanError, expand, load_plan, self_contained
from gpuest.synthetic import config_file_name, parse_config

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(REPO, "python", "gpuest", "collect", "examples", "gpu-node.yaml")


def timm_csv():
    """The measured timm runs (a test that needs them skips, or fails under CI, without)."""
    return measured_path(os.path.join("timm", "timm_a100.csv"))

MLP = {"input_size": 64, "output_size": 10, "depth": 2, "architecture": "pyramid",
       "batch_size": 8, "activation": "relu", "dropout_rate": 0.2, "use_dropout": True,
       "use_batch_norm": False}
TRANSFORMER = {"num_classes": 5, "embedding_size": [16, 32], "num_layers": {"min": 1, "max": 3},
               "num_heads": 4, "ff_hidden_size": 32, "dropout_rate": {"min": 0.0, "max": 0.3},
               "seq_length": 16, "vocab_size": 100, "batch_size": [4, 8]}


def plan(**top):
    doc = {"synthetic": [{"family": "mlp", "params": dict(MLP)}]}
    doc.update(top)
    return doc


def error_of(doc):
    with pytest.raises(PlanError) as e:
        expand(doc)
    return str(e.value)


def test_seed_file_names_round_trip(mlp_rows, cnn_rows, transformer_rows):
    # The collector names a synthetic job as the seed's launcher named its row.
    for rows in (mlp_rows, cnn_rows, transformer_rows):
        for row in rows:
            name = row.get("Filename") or row.get("filename")
            assert config_file_name(parse_config(name)) == name


def test_grid_expands_in_order_with_stable_ids():
    doc = plan(optimizers=["adam", "sgd"], precisions=["fp32", "amp"])
    doc["synthetic"][0]["params"]["depth"] = [1, 3]
    jobs = expand(doc).jobs
    assert len(jobs) == 2 * 2 * 2
    assert [(parse_config(j.model)["depth"], j.optimizer, j.precision) for j in jobs] == [
        (d, o, p) for d in (1, 3) for o in ("adam", "sgd") for p in ("fp32", "amp")]
    first = jobs[0]
    assert first.id == ("synthetic/input:64_output:10_depth:1_arch:pyramid_batch:8_act:relu"
                        "_dropout:0.2_dropout:True_batchnorm:False/b8/adam/fp32")
    assert parse_config(first.model) == {"family": "mlp", **MLP, "depth": 1}
    assert [j.id for j in expand(copy.deepcopy(doc)).jobs] == [j.id for j in jobs]


def test_samples_are_drawn_deterministically_from_ranges():
    doc = {"synthetic": [{"family": "transformer", "samples": 6, "seed": 7,
                          "params": TRANSFORMER}]}
    ids = [j.id for j in expand(doc).jobs]
    assert ids == [j.id for j in expand(copy.deepcopy(doc)).jobs]
    assert len(ids) == 6
    for j in expand(doc).jobs:
        cfg = parse_config(j.model)
        assert 1 <= cfg["num_layers"] <= 3 and 0.0 <= cfg["dropout_rate"] <= 0.3
        assert cfg["embedding_size"] in (16, 32) and j.batch_size == cfg["batch_size"]
        assert j.input_dtype == "int64"
    doc["synthetic"][0]["seed"] = 8
    assert [j.id for j in expand(doc).jobs] != ids


def test_model_entries_and_per_entry_settings():
    doc = {"optimizers": ["adamw"], "steps": 5,
           "models": [{"source": "torchvision", "names": ["resnet18", "alexnet"],
                       "batch_sizes": [4, 2], "input_shape": [3, 64, 64],
                       "precisions": ["amp"], "steps": 9}]}
    jobs = expand(doc).jobs
    assert [j.id for j in jobs] == ["torchvision/resnet18/b4/adamw/amp",
                                    "torchvision/resnet18/b2/adamw/amp",
                                    "torchvision/alexnet/b4/adamw/amp",
                                    "torchvision/alexnet/b2/adamw/amp"]
    assert {j.steps for j in jobs} == {9} and jobs[0].input_shape == (3, 64, 64)


def test_timm_csv_gives_every_measured_row():
    with open(timm_csv(), newline="") as f:
        rows = list(csv.DictReader(f))
    doc = {"optimizers": ["sgd_momentum"], "precisions": ["fp32", "amp"],
           "models": [{"source": "timm", "csv": timm_csv()}]}
    jobs = expand(doc).jobs
    assert len(jobs) == 2 * len({(r["model"], r["batch_size"]) for r in rows})
    by_id = {j.id: j for j in jobs}
    for r in rows[:50]:
        j = by_id[f"timm/{r['model']}/b{r['batch_size']}/sgd_momentum/fp32"]
        assert "x".join(map(str, j.input_shape)) == r["input_size"]


@pytest.mark.parametrize("change, key", [
    (lambda d: d.update(bogus=1), "bogus: unknown key"),
    (lambda d: d.update(precisions=["fp16"]), "precisions: 'fp16' is not one of fp32, amp"),
    (lambda d: d.update(optimizers="lion"), "optimizers: 'lion' is not one of"),
    (lambda d: d.update(steps=0), "steps: an integer >= 1"),
    (lambda d: d["synthetic"][0].update(family="rnn"), "synthetic[0].family: one of"),
    (lambda d: d["synthetic"][0]["params"].pop("depth"), "synthetic[0].params: missing depth"),
    (lambda d: d["synthetic"][0]["params"].update(depth="two"),
     "synthetic[0].params.depth: 'two' is not an integer"),
    (lambda d: d["synthetic"][0]["params"].update(use_dropout=1),
     "synthetic[0].params.use_dropout: 1 is not true or false"),
    (lambda d: d["synthetic"][0]["params"].update(depth={"min": 1, "max": 4}),
     "synthetic[0].params.depth: a min/max range needs `samples`"),
    (lambda d: d["synthetic"][0]["params"].update(depth={"min": 4, "max": 1}),
     "synthetic[0].params.depth: min 4 is above max 1"),
    (lambda d: d["synthetic"][0]["params"].update(architecture="spiral"),
     "synthetic[0] configuration 0 (input_size=64, output_size=10, depth=2, "
     "architecture=spiral"),
    (lambda d: d["synthetic"][0]["params"].update(colour=1),
     "synthetic[0].params.colour: unknown key"),
    (lambda d: d.update(models=[{"source": "keras", "names": ["x"]}]),
     "models[0].source: torchvision or timm"),
    (lambda d: d.update(models=[{"source": "torchvision", "names": ["resnet1000"],
                                 "batch_sizes": [2], "input_shape": [3, 8, 8]}]),
     "models[0].names: torchvision.models has no model 'resnet1000'"),
    (lambda d: d.update(models=[{"source": "torchvision", "names": ["resnet18"],
                                 "batch_sizes": [2]}]),
     "models[0].input_shape: torchvision models need one"),
    (lambda d: d.update(models=[{"source": "timm", "names": ["resnet18"],
                                 "batch_sizes": [0]}]),
     "models[0].batch_sizes: an integer >= 1"),
    (lambda d: d.update(models=[{"source": "timm", "csv": "no/such.csv"}]),
     "models[0].csv: cannot read no/such.csv"),
    (lambda d: d.update(pairs=[["nope", "nada"]]), "pairs[0]: no job 'nope' in the plan"),
    (lambda d: d["synthetic"].append(copy.deepcopy(d["synthetic"][0])), "appears twice"),
])
def test_errors_name_the_key(change, key):
    doc = plan()
    change(doc)
    assert key in error_of(doc)


def test_generator_refusals_name_the_configuration():
    cnn = {"input_channels": 3, "num_classes": 10, "base_num_filters": 8,
           "input_size": 5, "depth": 2, "architecture": "pyramid", "batch_size": 2,
           "activation": "relu", "dropout_rate": 0.1, "use_dropout": False,
           "use_batch_norm": False}
    message = error_of({"synthetic": [{"family": "cnn", "params": cnn}]})
    assert message.startswith("synthetic[0] configuration 0 (") and "input_size 5 < 7" in message
    heads = dict(TRANSFORMER, embedding_size=30, num_heads=4, num_layers=1, dropout_rate=0.1)
    message = error_of({"synthetic": [{"family": "transformer", "params": heads}]})
    assert "not divisible by num_heads 4" in message


def test_load_plan_names_the_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("synthetic: [{family: mlp, params: {depth: 1}}]\n")
    with pytest.raises(PlanError, match=r"p\.yaml: synthetic\[0\]\.params: missing"):
        load_plan(str(path))
    path.write_text("synthetic: [\n")
    with pytest.raises(PlanError, match=r"p\.yaml: not YAML"):
        load_plan(str(path))


def test_example_plan_expands():
    # The plan docs/collector.md runs on a GPU node: the timm rows at their batch sizes
    # and optimizer, the seed-style families, fp32 and amp.
    with open(EXAMPLE) as f:
        doc = yaml.safe_load(f)
    assert doc["models"][0]["csv"] == "../shared/data/timm/timm_a100.csv"
    doc["models"][0]["csv"] = timm_csv()  # relative to the repository root there
    plan = expand(doc)
    jobs = plan.jobs
    assert {j.source for j in jobs} == {"synthetic", "timm"}
    assert {j.precision for j in jobs} == {"fp32", "amp"}
    timm_jobs = [j for j in jobs if j.source == "timm"]
    assert {j.optimizer for j in timm_jobs} == {"sgd_momentum"}
    timm_rows = read_csv(timm_csv())
    assert len(timm_jobs) == 2 * len({(r["model"], r["batch_size"]) for r in timm_rows})
    families = {parse_config(j.model)["family"] for j in jobs if j.source == "synthetic"}
    assert families == {"mlp", "cnn", "transformer"}
    assert len(plan.pairs) == 2


def test_csv_names_pick_a_subset():
    doc = {"models": [{"source": "timm", "csv": timm_csv(), "names": ["resnet50"]}]}
    assert [j.batch_size for j in expand(doc).jobs] == [8, 16, 32, 64, 128]
    doc["models"][0]["names"] = ["resnet5000"]
    assert "models[0].names: 'resnet5000' is not a model of" in error_of(doc)


def test_short_lease_plan_runs_the_comparable_rows_first():
    with open(os.path.join(os.path.dirname(EXAMPLE), "short-lease.yaml")) as f:
        doc = yaml.safe_load(f)
    for entry in doc["models"]:
        entry["csv"] = timm_csv()
    jobs = expand(doc).jobs
    # The plan's order: its models (fp32 timm rows, comparable with the A100's) first.
    assert jobs[0].id == "timm/resnet50/b8/sgd_momentum/fp32"
    first_amp = next(i for i, j in enumerate(jobs) if j.precision == "amp")
    assert all(j.source == "timm" and j.precision == "fp32" for j in jobs[:first_amp])
    assert {j.source for j in jobs[first_amp:]} == {"timm", "synthetic"}


def test_self_contained_plan_has_the_same_jobs_without_the_csv(tmp_path):
    with open(os.path.join(os.path.dirname(EXAMPLE), "short-lease.yaml")) as f:
        doc = yaml.safe_load(f)
    for entry in doc["models"]:
        entry["csv"] = timm_csv()
    inline = self_contained(doc)
    assert all("csv" not in e for e in inline["models"])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(inline))  # what `plan --json` writes
    assert [j.id for j in load_plan(str(path)).jobs] == [j.id for j in expand(doc).jobs]
    assert [p.id for p in load_plan(str(path)).pairs] == [p.id for p in expand(doc).pairs]
