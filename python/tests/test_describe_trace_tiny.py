"""A model small enough to work out its training step's memory by hand."""
import torch.nn as nn

from helpers import bytes_by_category, check_trace_shape, live_curve, describe_dict

B, IN, OUT = 32, 64, 512


def _describe(optimizer="sgd"):
    model = nn.Sequential(nn.Linear(IN, OUT, bias=False), nn.ReLU())
    return describe_dict(model, input_shape=(IN,), batch_size=B, optimizer=optimizer)


def test_peak_by_hand():
    d = _describe()
    trace = d["trace"]
    check_trace_shape(trace)
    # The batch the step was traced at is the trace's own: it answers for no other.
    assert trace["batchSize"] == B == d["batchSize"]
    params = IN * OUT * 4          # the weight, fp32
    inputs = B * IN * 4 + B * 8    # the batch and its int64 labels
    act = B * OUT * 4              # one (batch, 512) fp32 activation
    by_cat = bytes_by_category(trace)
    assert by_cat["PARAMETER"] == params
    assert by_cat["INPUT"] == inputs
    assert by_cat["GRADIENT"] == params
    # Saved for backward: the ReLU output and log_softmax's output (cross entropy),
    # plus nll_loss's 4-byte total weight. Linear saves the input and weight, which
    # are counted as INPUT and PARAMETER.
    assert by_cat["ACTIVATION"] == 2 * act + 4
    # The peak is in backward: weight, batch, the two saved activations, and two
    # activation-sized gradients in flight (d log_softmax, d ReLU-out) plus the
    # 4-byte loss and 4-byte ones that seed backward.
    _, peak = live_curve(trace)
    assert peak == params + inputs + 4 * act + 8
    # After the step: weight, its gradient, the batch (plain SGD keeps no state).
    curve, _ = live_curve(trace)
    assert curve[-1] == params + params + inputs


def test_optimizer_state_sizes():
    params = IN * OUT * 4
    expect = {"sgd": 0, "sgd_momentum": params, "adam": 2 * params, "adamw": 2 * params,
              "rmsprop": params, "adagrad": params}
    for name, state in expect.items():
        d = _describe(name)
        assert bytes_by_category(d["trace"])["OPTIMIZER_STATE"] == state, name
        assert d["optimizer"] == "OPTIMIZER_" + name.upper()


def test_gradient_accumulation_runs_the_second_backward_beside_the_first_gradients():
    one = _describe("sgd")["trace"]
    model = nn.Sequential(nn.Linear(IN, OUT, bias=False), nn.ReLU())
    four = describe_dict(model, input_shape=(IN,), batch_size=B, optimizer="sgd",
                         gradient_accumulation=4)["trace"]
    check_trace_shape(four)
    params = IN * OUT * 4
    _, peak_one = live_curve(one)
    curve, peak_four = live_curve(four)
    # The second micro-batch's backward holds the first's gradient (a weight's worth)
    # beside its own activations, and its new gradient before adding it in.
    assert peak_four >= peak_one + params
    assert peak_four <= peak_one + 2 * params
    # Added in place: one gradient at the end, as after one micro-batch.
    assert curve[-1] == live_curve(one)[0][-1]
    assert bytes_by_category(four)["GRADIENT"] == params
    assert "gradient accumulation (4 micro-batches" in four["tracer"]


def test_gradient_accumulation_must_be_a_count():
    import pytest
    from gpuest.describe import DescribeError
    with pytest.raises(DescribeError, match="gradient_accumulation"):
        describe_dict(nn.Linear(IN, OUT), input_shape=(IN,), batch_size=B,
                      gradient_accumulation=0)


def test_the_optimizer_implementation_sets_its_temporaries():
    params = IN * OUT * 4

    def peak(impl):
        model = nn.Sequential(nn.Linear(IN, OUT, bias=False), nn.Linear(OUT, OUT, bias=False))
        d = describe_dict(model, input_shape=(IN,), batch_size=B, optimizer="adam",
                          optimizer_impl=impl)
        assert f"adam step emulated ({impl}, first step)" in d["trace"]["tracer"]
        return live_curve(d["trace"])

    (foreach_curve, _), (fused_curve, _), (single_curve, _) = (
        peak("foreach"), peak("fused"), peak("single_tensor"))
    # After the step all three hold the same (weights, gradients, two states each).
    assert foreach_curve[-1] == fused_curve[-1] == single_curve[-1]
    # During it, foreach holds a sqrt(v) of every weight at once (IN x OUT, OUT x OUT),
    # single_tensor one at a time (the larger), fused none.
    extra = lambda curve: max(curve) - curve[-1]  # noqa: E731
    assert extra(fused_curve) <= 0 < extra(single_curve) < extra(foreach_curve)
    assert extra(foreach_curve) == params + OUT * OUT * 4
    assert extra(single_curve) == OUT * OUT * 4


def test_adams_state_is_made_parameter_by_parameter():
    # torch.optim.Adam's lazy state: each parameter's exp_avg, then its exp_avg_sq, in
    # parameter order. Where the allocator puts them follows that order.
    model = nn.Sequential(nn.Linear(IN, OUT, bias=False), nn.Linear(OUT, 8, bias=False))
    d = describe_dict(model, input_shape=(IN,), batch_size=B, optimizer="adam")
    trace = d["trace"]
    states = sorted((int(at), int(size)) for at, size, category in
                    zip(trace["allocAt"], trace["sizeBytes"], trace["category"])
                    if category == "ALLOCATION_CATEGORY_OPTIMIZER_STATE")
    first, second = IN * OUT * 4, OUT * 8 * 4
    assert [size for _, size in states] == [first, first, second, second]
