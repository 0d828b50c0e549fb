import pytest

from gpuest.synthetic import parse_config


def test_mlp_name():
    cfg = parse_config("input:2346_output:197_depth:2_arch:pyramid_batch:996_act:relu_"
                       "dropout:0.3382392352475416_dropout:True_batchnorm:True.out")
    assert cfg == {"family": "mlp", "input_size": 2346, "output_size": 197, "depth": 2,
                   "architecture": "pyramid", "batch_size": 996, "activation": "relu",
                   "dropout_rate": 0.3382392352475416, "use_dropout": True,
                   "use_batch_norm": True}


def test_cnn_name_with_underscored_activation():
    cfg = parse_config("input_channels:1_num_classes:167_depth:11_arch:pyramid_base_filters:70_"
                       "batch:46_input_size:118_act:leaky_relu_dropout:0.19_dropout:False_"
                       "batchnorm:True.out")
    assert cfg["family"] == "cnn"
    assert cfg["activation"] == "leaky_relu"
    assert (cfg["input_channels"], cfg["num_classes"], cfg["base_num_filters"],
            cfg["input_size"], cfg["batch_size"]) == (1, 167, 70, 118, 46)
    assert cfg["dropout_rate"] == 0.19 and cfg["use_dropout"] is False


def test_transformer_row_checks_columns():
    name = ("num_classes:273_embedding_size:128_num_layers:8_num_heads:8_ff_hidden_size:332_"
            "dropout_rate:0.16_seq_length:512_input_size:553893_num_samples:1527_batch_size:64.out")
    cfg = parse_config({"filename": name, "vocab_size": "553893", "batch_size": "64"})
    assert cfg["family"] == "transformer"
    assert (cfg["vocab_size"], cfg["seq_length"], cfg["batch_size"]) == (553893, 512, 64)
    with pytest.raises(ValueError):
        parse_config({"filename": name, "batch_size": "32"})


@pytest.mark.parametrize("bad", ["", "nonsense", "input:3_output:2.out", {"x": 1}])
def test_bad_input(bad):
    with pytest.raises((ValueError, KeyError)):
        parse_config(bad)
