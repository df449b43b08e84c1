"""PyTorch backend: tensors are ``torch.Tensor``; gradients come from ``torch.autograd``."""

import contextlib

import numpy as np

from . import _common

torch = _common.require("torch", "torch")
F = torch.nn.functional

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32,
           "int64": torch.int64, "bool": torch.bool}


def _dtype(dtype):
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    return _DTYPES[_common.numpy_dtype(dtype).name]


# -- creating and converting -------------------------------------------------------------


def normal(mean, std, shape, device=None):
    return from_numpy(_common.normal_numpy(mean, std, shape), device)


def uniform(low, high, shape, device=None):
    return from_numpy(_common.uniform_numpy(low, high, shape), device)


def zeros(shape, dtype=None, device=None):
    return torch.zeros(shape, dtype=_dtype(dtype) or torch.float32, device=device)


def ones(shape, dtype=None, device=None):
    return torch.ones(shape, dtype=_dtype(dtype) or torch.float32, device=device)


def zeros_like(x):
    return torch.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    a = _common.arange_numpy(start, stop, step, dtype)
    whole = all(isinstance(v, (int, np.integer)) for v in (start, stop, step) if v is not None)
    if whole and a.dtype.kind == "i" and device is not None and torch.device(device).type != "cpu":
        # made there by a kernel, not copied from the host: a CUDA graph can hold a kernel (the masked
        # loss's positions, inside a training step); the same integers
        first, step = (int(a[0]) if len(a) else 0), int(step)
        return torch.arange(first, first + len(a) * step, step, dtype=_dtype(a.dtype), device=device)
    return from_numpy(a, device)


def tensor(data, dtype=None, device=None):
    if isinstance(data, torch.Tensor):
        return data.to(device=device, dtype=_dtype(dtype))
    # not through from_numpy, whose float32/int64 defaults would override ``dtype``
    # (np.require, not np.ascontiguousarray: that one turns a 0-d array into shape (1,))
    t = torch.from_numpy(np.require(_common.as_numpy(data, dtype), requirements="C"))
    return t if device is None else t.to(device)


def from_numpy(array, device=None):
    t = torch.from_numpy(np.require(_common.as_numpy(array), requirements="C"))  # 0-d stays 0-d
    return t if device is None else t.to(device)


def to_numpy(x):
    if isinstance(x, torch.Tensor):
        return (x.to_dense() if x.is_mkldnn else x).detach().cpu().numpy()
    return np.asarray(x)


def astype(x, dtype):
    return x.to(_dtype(dtype))


def shape(x):
    return tuple(x.shape)


def size(x):
    return x.numel()


def is_tensor(x):
    return isinstance(x, torch.Tensor)


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    return torch.reshape(x, tuple(shape))


def transpose(x, axes=None):
    return x.permute(*(axes if axes is not None else reversed(range(x.dim()))))


def concat(tensors, axis=0):
    return torch.cat(tuple(tensors), dim=axis)


def stack(tensors, axis=0):
    return torch.stack(tuple(tensors), dim=axis)


def unstack(x, axis=0):
    return list(torch.unbind(x, dim=axis))


def take(x, indices, axis=0):
    axis = axis % x.dim()  # a negative axis would index the shapes below from the end
    if axis == 0 and x.dim() == 2:
        return F.embedding(indices, x)  # its backward is a dense scatter, ~10x faster than x[indices]'s
    if axis == 0:
        return x[indices]
    return torch.index_select(x, axis, indices.reshape(-1)).reshape(
        x.shape[:axis] + indices.shape + x.shape[axis + 1:])


# -- arithmetic ------------------------------------------------------------------------------


def matmul(a, b):
    if ONEDNN_PRODUCTS and _through_onednn(a, b):
        # a b = linear(a, b^T), with b^T laid out as oneDNN's weight; the copies cost less than MKL's loss
        return torch.ops.mkldnn._linear_pointwise(a.contiguous(), b.t().contiguous(), None, "none", [], "")
    return torch.matmul(a, b)


#: Whether large float32 products outside autograd go through oneDNN rather than torch's BLAS: only on
#: CPUs not made by Intel that have AVX-512, which oneDNN uses there and MKL, that BLAS, does not. On a
#: 2-core AMD EPYC with AVX-512 the hand-written scans' weight gradients ((512, 1088) x (1088, 512..2048))
#: ran at 184-190 GFLOP/s through MKL and at 297-313 through oneDNN, copies included (2026-12-07). On one
#: with AVX2 only (Zen 3) both run AVX2 code and the copies decide: the LSTM's (512, 1120) x (1120, 2048)
#: took 23 ms through MKL (transposed operands read in place) and 29 through oneDNN (5.6 ms of them the
#: transposed copy of the gate gradients), the LSTM's backward scan 55-56 ms against 61-65 (2026-12-07).
#: On Intel's CPUs MKL stays.
ONEDNN_PRODUCTS = (torch.backends.mkldnn.is_available() and torch.backends.mkl.is_available()
                   and _common.cpu_vendor() not in ("GenuineIntel", "") and "avx512f" in _common.cpu_flags())
#: The fewest rows of ``a`` for :data:`ONEDNN_PRODUCTS`: with 32 rows the copy of ``b`` costs more than it
#: saves ((32, 512) x (512, 2048): 0.62 against MKL's 0.52 ms); from 128 rows on it does not. Products with
#: fewer than 64 inner or 16 output columns are too small for either to matter and stay with MKL.
ONEDNN_MIN_ROWS = 128


def _through_onednn(a, b):
    return (a.dim() == 2 and b.dim() == 2 and a.dtype == torch.float32 and b.dtype == torch.float32
            and a.device.type == "cpu" and b.device.type == "cpu" and a.shape[0] >= ONEDNN_MIN_ROWS
            and a.shape[1] >= 64 and b.shape[1] >= 16
            and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)))


def dense(X, W, b):
    return matmul(X, W) + b


def linear(X, W, b=None):
    # ``W`` may come from :func:`prepack_linear` (a oneDNN-packed weight): then oneDNN runs the
    # product with the addend fused.
    if W.is_mkldnn:
        X = X.contiguous()
        if b is not None and b.dim() == 2 and b.shape[0] == 1:
            b = b.reshape(-1)
        if b is None or b.dim() == 1:
            return torch.ops.mkldnn._linear_pointwise(X, W, b, "none", [], "")
        b = b.expand(X.shape[0], W.shape[0]).contiguous()
        return torch.ops.mkldnn._linear_pointwise.binary(X, b, W, None, "add")
    if b is None or b.dim() == 1:
        return F.linear(X, W, b)
    return torch.addmm(b, X, W.t())  # one kernel for the product and the sum


#: The fewest entries a weight needs for :func:`prepack_linear` to pack it. Below, oneDNN's packed product
#: is slower than F.linear's (32-row products on one core, 2026-11-29: a 32x96 weight 26 against 8 us, 64x256
#: 23 against 15) and the reorder itself costs ~150 us; from 256x256 on it is as fast or faster (256x768: 163
#: against 239 us; 1024x4096: 3.5 against 5.4 ms).
PACK_MIN_ENTRIES = 256 * 256


def _can_pack(W):
    return (torch.backends.mkldnn.is_available() and W.device.type == "cpu" and W.dtype == torch.float32
            and W.dim() == 2 and W.numel() >= PACK_MIN_ENTRIES
            and not (W.requires_grad and torch.is_grad_enabled()))


def prepack_linear(W):
    # On a CPU, a large W is reordered once into oneDNN's blocked layout: MKL's sgemm, behind F.linear,
    # repacks its weight on every call, which for the 32-row products of a recurrent step costs
    # 1.3-1.8x (bench/RESULTS.md, torch LSTM). The packed tensor only feeds ``linear``, outside
    # autograd (the hand-written scans of ``models/bptt.py``); anywhere else, and for a small W
    # (:data:`PACK_MIN_ENTRIES`), W comes back as it is.
    if not _can_pack(W):
        return W
    return torch.ops.mkldnn._reorder_linear_weight(W.detach().contiguous())


def tanh(x):
    return torch.tanh(x)


def tanh_grad(Y, dY):
    return torch.ops.aten.tanh_backward(dY, Y)  # the kernel torch.tanh's own backward uses


def sigmoid(x):
    return torch.sigmoid(x)


def sigmoid_grad(Y, dY):
    return torch.ops.aten.sigmoid_backward(dY, Y)  # one kernel, the one torch.sigmoid's own backward uses


def relu(x):
    return torch.relu(x)


def exp(x):
    return torch.exp(x)


def sin(x):
    return torch.sin(x)


def log(x):
    return torch.log(x)


def sqrt(x):
    return torch.sqrt(x)


def abs(x):  # noqa: A001
    return torch.abs(x)


def _pair(x, y):
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x, dtype=y.dtype, device=y.device)
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(y, dtype=x.dtype, device=x.device)
    return x, y


def _tensor_and_bound(x, y):
    """(tensor, number) when one of x, y is a floating tensor and the other a Python number, else None."""
    for tensor, number in ((x, y), (y, x)):
        if isinstance(number, (int, float)) and torch.is_tensor(tensor) and tensor.is_floating_point():
            return tensor, number
    return None


def maximum(x, y):
    # A number is clamp's bound, not a tensor made from it: that would be a copy from the host, which a
    # CUDA graph cannot hold (the clipping's max(||g||, theta) in every training step). Same values,
    # NaN kept.
    pair = _tensor_and_bound(x, y)
    return torch.clamp_min(*pair) if pair else torch.maximum(*_pair(x, y))


def minimum(x, y):
    pair = _tensor_and_bound(x, y)
    return torch.clamp_max(*pair) if pair else torch.minimum(*_pair(x, y))


# -- reductions ------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return torch.sum(x) if axis is None and not keepdims else torch.sum(x, dim=axis, keepdim=keepdims)


def mean(x, axis=None, keepdims=False):
    return torch.mean(x) if axis is None and not keepdims else torch.mean(x, dim=axis, keepdim=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    if axis is None:
        return torch.amax(x, dim=(), keepdim=True) if keepdims else torch.max(x)  # dim=(): all axes
    return torch.amax(x, dim=axis, keepdim=keepdims)


def argmax(x, axis=None):
    return torch.argmax(x) if axis is None else torch.argmax(x, dim=axis)


def sum_of_squares(tensors):
    return _common.sum_of_squares(tensors, sum)


def nonfinite_probe(tensors):
    return _common.nonfinite_probe(tensors, sum)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return F.one_hot(indices.long(), depth).to(torch.float32)


def softmax(x, axis=-1):
    return torch.softmax(x, dim=axis)


def log_softmax(x, axis=-1):
    return torch.log_softmax(x, dim=axis)


def softmax_cross_entropy(logits, labels):
    return F.cross_entropy(logits, labels.reshape(-1).long(), reduction="none")


# -- the recurrent layer ---------------------------------------------------------------------


_LAYERS = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}
_CELLS = {"RNN_TANH": "rnn", "GRU": "gru", "LSTM": "lstm"}


def _build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after):
    # torch warns about dropout on a one-layer stack (it only acts between layers)
    return _LAYERS[cell](num_inputs, num_hiddens, num_layers, bidirectional=bidirectional,
                         dropout=dropout if num_layers > 1 else 0.0)


def _describe(layer):
    if not isinstance(layer, torch.nn.RNNBase):
        return None, []
    unsupported = [setting for setting, bad in (
        ("nonlinearity='relu'", layer.mode == "RNN_RELU"), ("batch_first=True", layer.batch_first),
        ("bias=False", not layer.bias), (f"proj_size={layer.proj_size}", layer.proj_size > 0)) if bad]
    cell = _CELLS.get(layer.mode, "rnn")
    return {"cell": cell, "num_inputs": layer.input_size, "num_hiddens": layer.hidden_size,
            "num_layers": layer.num_layers, "bidirectional": layer.bidirectional,
            "dropout": float(layer.dropout), "reset_after": cell == "gru"}, unsupported


def _call(layer, weights, X, states, training):
    D = 2 if layer.bidirectional else 1
    params = {}
    for slot, (W_x, W_h, b_x, b_h) in enumerate(weights):
        suffix = f"_l{slot // D}" + ("_reverse" if slot % D else "")
        if layer.mode in ("LSTM", "GRU") or W_x.device.type != "cpu":
            # (The adapter's stacked gates arrive contiguous; a weight given transposed, as a one-gate layer's
            # is, does not.) PyTorch runs its CPU LSTM on oneDNN, which copies a non-contiguous weight in the
            # forward and again in the backward pass; one copy here serves both
            # (~4% of a 512-unit step). Its CPU GRU multiplies by the transposed view as it lies, and the
            # backward pass's products with it took 880 ms over 20 steps of 512 units where the same
            # products with the contiguous weight took 539 (torch.profiler; the step 4-6% faster in
            # tokens/s); the tanh RNN's products ran as fast either way. cuDNN refuses a non-contiguous
            # weight (flatten_parameters: "view size is not compatible").
            W_x, W_h = W_x.contiguous(), W_h.contiguous()
        params.update({f"weight_ih{suffix}": W_x, f"weight_hh{suffix}": W_h,
                       f"bias_ih{suffix}": b_x, f"bias_hh{suffix}": b_h})
    hx = tuple(torch.stack(s) for s in zip(*states))  # (H,) or (H, C), each (layers * directions, B, h)
    layer.train(training)  # dropout between layers in training only
    Y, out = torch.func.functional_call(layer, params, (X, hx if len(hx) == 2 else hx[0]))
    out = out if isinstance(out, tuple) else (out,)
    return Y, [tuple(s[slot] for s in out) for slot in range(len(weights))]


def _weights(layer):
    D = 2 if layer.bidirectional else 1
    return [[getattr(layer, f"{name}_l{slot // D}" + ("_reverse" if slot % D else "")).detach().clone()
             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            for slot in range(layer.num_layers * D)]


_NATIVE = _common.NativeRNN(
    layer_names="torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM",
    gate_order=_common.CUDNN_GATE_ORDER, transposed=True, stacks_layers=True, gru_forms=(True,),
    build=_build, describe=_describe, call=_call, weights=_weights)


def native_rnn():
    # ``torch.nn.RNN``, ``GRU`` and ``LSTM``, declared for d2lrnn's adapter (see ``NativeRNN``).
    return _NATIVE


def _assign(param, value):
    with torch.no_grad():
        param.copy_(value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(value))


def _set_grad(param, g):
    with torch.no_grad():
        if param.grad is None:
            param.grad = g.detach().clone()
        else:
            param.grad.copy_(g)


def _is_module(obj):
    return isinstance(obj, torch.nn.Module)


def _module_params(obj):
    return [p for p in obj.parameters() if p.requires_grad] if _is_module(obj) else None


def _call_with(module, params, *args, training=None):
    names = [name for name, p in module.named_parameters() if p.requires_grad]
    was = module.training
    if training is not None:
        module.train(training)
    try:
        return torch.func.functional_call(module, dict(zip(names, params)), args)
    finally:
        module.train(was)


def _book_seq2seq_init(module, device):
    """Xavier-uniform weights for every ``nn.Linear`` and ``nn.GRU`` (biases and embeddings as they are),
    then the module moved to ``device``: the book's ``train_seq2seq`` on PyTorch."""
    for layer in module.modules():
        if isinstance(layer, (torch.nn.Linear, torch.nn.GRU)):
            for name, param in layer.named_parameters(recurse=False):
                # a lazy layer's weight has no shape yet (the book's cells leave it as it comes)
                lazy = isinstance(param, torch.nn.parameter.UninitializedParameter)
                if name.startswith("weight") and not lazy:
                    torch.nn.init.xavier_uniform_(param)
    if device is not None:
        module.to(device)


def _backward(fn):
    loss = fn()
    loss.backward()
    return loss


def _dense(num_outputs, sigma=None):
    """PyTorch's ``LazyLinear``. ``sigma`` changes nothing, as in the book's PyTorch ``LinearRegression``:
    the layer draws its parameters (Kaiming's uniform) when its first call shows the input size, over
    whatever was written into them before."""
    return torch.nn.LazyLinear(num_outputs)


def _set_training(module, mode):
    module.train(mode)


_IN_PLACE_HOOKS = _common.InPlaceHooks(grad=lambda p: p.grad, set_grad=_set_grad, assign=_assign,
                                 is_variable=lambda x: False, is_module=_is_module,
                                 module_params=_module_params, call_with=_call_with,
                                 module_bases=(torch.nn.Module, torch.nn.Module, "forward"),
                                 book_seq2seq_init=_book_seq2seq_init,
                                 parameter=torch.nn.Parameter, backward=_backward, no_grad=torch.no_grad,
                                 set_training=_set_training, dense=_dense,
                                 embedding=torch.nn.Embedding,
                                 run_layer=lambda layer, inputs, H: layer(inputs, H), layer_inputs=True)


def in_place_hooks():
    # ``loss.backward()`` attaches ``.grad`` to every parameter; the book's ``sgd`` and ``grad_clipping``
    # rewrite parameters and gradients in place (see ``InPlaceHooks``).
    return _IN_PLACE_HOOKS


def dropout(x, p):
    return torch.nn.functional.dropout(x, p, training=True)


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    # Seed the shared NumPy generator and torch's own (used by dropout): the CPU's, and the GPUs' where
    # there are any. Not ``torch.manual_seed``: on a machine without CUDA it queues a seeding for later
    # for each kind of accelerator, each with a formatted stack trace (0.8 ms a call under pytest).
    _common.seed(seed)
    torch.default_generator.manual_seed(int(seed))
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(int(seed))


def detach(x):
    return x.detach()


def value_and_grad(f, has_aux=False):
    # ``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with torch.autograd.

    def wrapped(params, *args):
        leaves = [p.detach().requires_grad_(True) for p in params]
        out = f(leaves, *args)
        value, aux = out if has_aux else (out, None)
        # A value that depends on no parameter (all of them detached) has zero gradients, as on NumPy
        # and TensorFlow; torch.autograd.grad would raise.
        grads = torch.autograd.grad(value, leaves, allow_unused=True) if value.requires_grad \
            else [None] * len(leaves)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(leaves, grads)]
        value = value.detach()
        if has_aux:
            return (value, _common.tree_map(detach, aux)), grads
        return value, grads

    return wrapped


def custom_vjp(fwd, bwd, differentiable=False):

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outputs, residuals = fwd(*args)
            # Fresh handles: a residual that is also an output (the stacked states) would hold its
            # grad_fn, whose context holds the residuals: a cycle through autograd's C++ graph that
            # kept every step's activations alive (1.8 GB peak for the LSTM's 512 hidden units).
            ctx.residuals = _common.tree_map(torch.Tensor.detach, residuals)
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *gs):
            return tuple(bwd(ctx.residuals, *gs))

    return Function.apply


def scan(step, carry, xs, reverse=False, unroll=False):
    # A Python loop: each input unstacked once (views), each output stacked once.
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def compile(fn, calls="many", key=None):  # noqa: A001
    # On the CPU eager PyTorch is fastest for these small step functions: returned unchanged. Where CUDA
    # is available, with calls="many", a call on a CUDA device replays a CUDA graph of its kernels, one
    # launch in place of hundreds (_torch_graphs); calls="few" and calls on the CPU run eagerly.
    # ``key`` is not used: each caller captures its own graphs (they hold its buffers).
    if calls == "few" or not torch.cuda.is_available():
        return fn
    from ._torch_graphs import Graphed

    return Graphed(fn)


def autocast(dtype, device=None):
    # torch.autocast: products (and the recurrent layers) in bfloat16, reductions and losses in float32.
    if dtype != "bfloat16":
        return None
    kind = "cpu" if device is None else torch.device(device).type
    context = torch.autocast(kind, dtype=torch.bfloat16)
    if kind == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        # A CPU without AVX-512 (an AMD EPYC with AVX2 only): oneDNN has no bfloat16 LSTM there, and
        # torch.nn.LSTM under autocast raises "could not create a primitive descriptor". With oneDNN off for
        # the step, torch's own kernels run it (the LSTM in float32, the products in bfloat16).
        return _without_onednn(context)
    return context


@contextlib.contextmanager
def _without_onednn(context):
    # torch.backends.mkldnn.flags would do it, with a warning about Intel GPUs at every step
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        with context:
            yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def try_gpu(i=0):
    return torch.device(f"cuda:{i}") if torch.cuda.device_count() > i else cpu()


def cpu():
    return torch.device("cpu")


def num_gpus():
    # How many CUDA GPUs torch sees.
    return torch.cuda.device_count()


def to_device(x, device):
    return x if device is None else x.to(device)


def device_of(x):
    return x.device


def set_num_threads(n):
    # Limit torch's intra-op threads.
    torch.set_num_threads(int(n))
