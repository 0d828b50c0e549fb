"""nn.LSTM, nn.GRU and nn.RNN traced as cuDNN trains them on a GPU.

On CUDA, PyTorch runs a whole recurrent module as one ``_cudnn_rnn`` call
(aten/src/ATen/native/cudnn/RNN.cpp), which has no fake or meta kernel on torch
1.13; the CPU path decomposes into per-step ops that allocate nothing like it. This
swaps the ``_VF.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` calls of
``torch.nn.modules.rnn`` for an autograd function with the memory of
``_cudnn_rnn`` and its backward:

- forward: the output (seq, batch, dirs x hidden), the final hidden (and cell)
  state, and cuDNN's training reserve space, kept for backward with the input, the
  initial states and the output; a batch-first input is copied to (seq, batch) order
  for the call and the copy freed after.
- backward: the input's contiguous copy again (for the data and then the weight
  pass), the output's gradient in (seq, batch) order when it arrives batch-first,
  dx, dhx (dcx), and one flat weight gradient whose views become the parameters'
  ``.grad``.
- under autocast (AutocastRNN.cpp's cast-and-reflatten): the weights copied into
  one half-precision flat buffer, kept for backward; the gradient flat buffer is
  half precision and the fp32 gradients are made from it.

cuDNN's reserve space (cudnnGetRNNTrainingReserveSize) is opaque; its size here is,
in elements of the data type, dirs x seq x batch x hidden x
(6 layers - 1) for LSTM, (7 layers - 1) for GRU, (2 layers - 1) for a plain RNN:
every layer's gates (LSTM 4, GRU 6 values per unit: gates and the pre-activations
backward needs; RNN 1) and its cell state, and the hidden states of all layers but
the last, whose hidden states are the output. Source: PyTorch issue 2895, where
cuDNN reported 736,000,000 B (LSTM) and 864,000,000 B (GRU) for the same 4-layer,
hidden-320 model (its parameter counts fix layers, hidden and input size): 23 : 27
= (6x4 - 1) : (7x4 - 1), both 4 B x 8e6 x 23 and x 27, one seq x batch of 25,000.
Not modelled: cuDNN's per-call workspace (freed after each call, a few MiB there)
and the dropout state it keeps when ``dropout > 0``.

Packed sequences and LSTMs with ``proj_size`` keep PyTorch's own path.
"""
from __future__ import annotations

import contextlib
import torch
import torch.nn.modules.rnn as rnn_module

# Reserve-space elements per (direction, step, sample, hidden unit): a + b x layers.
_RESERVE_PER_LAYER = {"lstm": 6, "gru": 7, "rnn_tanh": 2, "rnn_relu": 2}


def reserve_elements(mode: str, layers: int, directions: int, seq: int, batch: int,
                     hidden: int) -> int:
    """Elements of cuDNN's RNN training reserve space (see the module docstring)."""
    return directions * seq * batch * hidden * (_RESERVE_PER_LAYER[mode] * layers - 1)


class _Spec:
    __slots__ = ("mode", "layers", "directions", "hidden", "batch_first", "training",
                 "half")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class _CudnnRNN(torch.autograd.Function):
    """Allocations of ``_cudnn_rnn`` and ``_cudnn_rnn_backward``; no values."""

    @staticmethod
    def forward(ctx, spec, x, h0, c0, *weights):
        seq, batch = (x.shape[1], x.shape[0]) if spec.batch_first else x.shape[:2]
        hidden, dirs = spec.hidden, spec.directions
        if spec.batch_first:  # the (seq, batch) copy cuDNN reads; freed at the end
            staged = x.transpose(0, 1).contiguous()
            del staged
        out = x.new_empty((seq, batch, dirs * hidden))
        hy = h0.new_empty(h0.shape)
        cy = c0.new_empty(c0.shape) if c0 is not None else None
        saved = [x, h0, out]
        if c0 is not None:
            saved.append(c0)
        if spec.training:
            saved.append(x.new_empty(
                (reserve_elements(spec.mode, spec.layers, dirs, seq, batch, hidden),)))
            if spec.half is not None:  # autocast's half-precision flat weight copy
                saved.append(x.new_empty((sum(w.numel() for w in weights),),
                                         dtype=spec.half))
        ctx.spec = spec
        ctx.has_cell = c0 is not None
        ctx.save_for_backward(*saved, *weights)
        if spec.batch_first:
            out = out.transpose(0, 1)
        return (out, hy, cy) if cy is not None else (out, hy)

    @staticmethod
    def backward(ctx, grad_out, grad_hy, grad_cy=None):
        spec = ctx.spec
        saved = ctx.saved_tensors
        x, h0, out = saved[:3]
        c0 = saved[3] if ctx.has_cell else None
        n_state = 3 + ctx.has_cell + ((1 + (spec.half is not None)) if spec.training else 0)
        weights = saved[n_state:]
        # Undefined gradients of unused outputs are zeros for cuDNN.
        grad_out = torch.zeros_like(out) if grad_out is None else grad_out
        grad_hy = torch.zeros_like(h0) if grad_hy is None else grad_hy
        if ctx.has_cell and grad_cy is None:
            grad_cy = torch.zeros_like(c0)
        if spec.batch_first:
            staged_grad = grad_out.transpose(0, 1).contiguous()  # dy in (seq, batch)
            staged_x = x.transpose(0, 1).contiguous()            # for the data pass
            dx = torch.empty_like(staged_x)
            del staged_x
        else:
            staged_grad = grad_out.contiguous()
            dx = torch.empty_like(x)
        dhx = torch.empty_like(h0)
        dcx = torch.empty_like(c0) if ctx.has_cell else None
        del staged_grad
        if spec.batch_first:
            staged_x = x.transpose(0, 1).contiguous()  # again, for the weight pass
            del staged_x
            dx = dx.transpose(0, 1)
        dw = weights[0].new_zeros((sum(w.numel() for w in weights),),
                                  dtype=spec.half or weights[0].dtype)
        grads, offset = [], 0
        for w in weights:
            grads.append(dw[offset:offset + w.numel()].view(w.shape))
            offset += w.numel()
        return (None, dx, dhx, dcx, *grads)


def _padded_call(mode: str, original, autocast):
    """The _VF function for ``mode``, with cuDNN's memory for the padded form;
    ``autocast`` as cudnn_recurrent's."""

    def call(*args):
        if not isinstance(args[3], bool):  # packed: (data, batch_sizes, hx, params, ...)
            return original(*args)
        (x, hx, params, has_biases, layers, _dropout, train, bidirectional,
         batch_first) = args
        dirs = 2 if bidirectional else 1
        per_layer = 4 if has_biases else 2
        if len(params) != per_layer * layers * dirs:  # an LSTM with proj_size
            return original(*args)
        h0, c0 = (hx[0], hx[1]) if mode == "lstm" else (hx, None)
        half = autocast.dtype() if autocast is not None else None
        if half is not None:  # autocast casts the input and states as it does any
            x, h0 = x.to(half), h0.to(half)
            c0 = c0.to(half) if c0 is not None else None
        spec = _Spec(mode=mode, layers=layers, directions=dirs, hidden=h0.shape[-1],
                     batch_first=batch_first,
                     training=bool(train) and torch.is_grad_enabled(), half=half)
        return _CudnnRNN.apply(spec, x, h0, c0, *params)

    return call


class _VFProxy:
    """``_VF`` with the recurrent functions swapped; everything else passes through."""

    def __init__(self, original, autocast):
        self._original = original
        for mode in _RESERVE_PER_LAYER:
            setattr(self, mode, _padded_call(mode, getattr(original, mode), autocast))

    def __getattr__(self, name):
        return getattr(self._original, name)


@contextlib.contextmanager
def cudnn_recurrent(autocast=None):
    """Within the block, recurrent modules allocate as cuDNN's training path does;
    ``autocast`` (a CudaAutocast) says, through ``dtype()``, when its region casts.
    The swapped functions hold it themselves (no module state: a session's patch
    answers to that session only). The original ``_VF`` is restored after, whatever
    happens."""
    original = rnn_module._VF
    rnn_module._VF = _VFProxy(original, autocast)
    try:
        yield
    finally:
        rnn_module._VF = original


@contextlib.contextmanager
def current_flat_weights(model):
    """Recurrent modules pass ``_flat_weights``, a list they keep of their parameter
    objects, to ``_VF``; after the parameters were swapped (for fake ones) it still
    holds the old ones. Within the block it lists the current parameters."""
    kept = []
    try:
        for m in model.modules():
            names = getattr(m, "_flat_weights_names", None)
            if names is None or "_flat_weights" not in m.__dict__:
                continue
            kept.append((m, m.__dict__["_flat_weights"]))
            m.__dict__["_flat_weights"] = [m._parameters.get(n) for n in names]
        yield
    finally:
        for m, weights in reversed(kept):
            m.__dict__["_flat_weights"] = weights
