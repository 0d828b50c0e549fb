"""LoRA-style adapters as PEFT builds them: frozen 16-bit base weights, float32
adapters, and the adapter's input cast up to float32 (peft's ``_cast_input_dtype``).

Measured on an H200 (data/h200-llm-finetune/README.md): the cast copies, one per
adapted projection, are what the trace missed while it described every parameter in
the job's 16-bit dtype (-8 % of the allocated peak of a 0.2B Llama LoRA step).
"""
import torch
import torch.nn as nn

from helpers import bytes_by_category, describe_dict

B, T, H, R, LAYERS = 2, 64, 128, 8, 3


class Adapted(nn.Module):
    """peft.tuners.lora.Linear's forward, without peft."""

    def __init__(self):
        super().__init__()
        self.base = nn.Linear(H, H, bias=False)
        self.lora_A = nn.Linear(H, R, bias=False)
        self.lora_B = nn.Linear(R, H, bias=False)

    def forward(self, x):
        result = self.base(x)
        up = x.to(self.lora_A.weight.dtype)
        return (result + self.lora_B(self.lora_A(up)) * 2.0).to(result.dtype)


def _adapted_model(adapter_dtype):
    model = nn.Sequential(*[Adapted() for _ in range(LAYERS)]).to(torch.bfloat16)
    for layer in model:
        layer.base.weight.requires_grad_(False)
        layer.lora_A.to(adapter_dtype)
        layer.lora_B.to(adapter_dtype)
    return model


def _describe(model):
    return describe_dict(model, input_shape=(T, H), batch_size=B, optimizer="adamw",
                         dtype="bfloat16", loss="mean")


def test_float32_adapters_keep_their_dtype_beside_bfloat16_weights():
    trace = _describe(_adapted_model(torch.float32))["trace"]
    by_cat = bytes_by_category(trace)
    base, adapters = LAYERS * H * H * 2, LAYERS * 2 * H * R * 4
    assert by_cat["PARAMETER"] == base + adapters
    # AdamW's two states per trainable (adapter) weight, in its float32 (and a
    # few bytes of step counts).
    assert 2 * adapters <= by_cat["OPTIMIZER_STATE"] < 2 * adapters + 1024
    # Each adapter's input, cast up to float32 and saved for lora_A's weight gradient.
    cast = B * T * H * 4
    saved = [s for s, c in zip(trace["sizeBytes"], trace["category"])
             if c == "ALLOCATION_CATEGORY_ACTIVATION" and s == cast]
    assert len(saved) >= LAYERS


def test_one_dtype_models_are_still_cast_to_the_job_dtype():
    model = _adapted_model(torch.float32).float()  # all float32: described as bfloat16
    by_cat = bytes_by_category(_describe(model)["trace"])
    assert by_cat["PARAMETER"] == LAYERS * (H * H + 2 * H * R) * 2
