"""PaddlePaddle backend: tensors are ``paddle.Tensor``; gradients come from Paddle's eager autograd.

Dtypes and devices: every function takes a NumPy dtype or its name as the other backends do, and
Paddle's own (``paddle.int64``); devices are Paddle places (``paddle.CPUPlace()``,
``paddle.CUDAPlace(0)``), the objects ``try_gpu`` and ``cpu`` return.

Importing Paddle prints nothing here: its "No ccache found" warning (about compiling C++ extensions,
which d2lrnn does not do) and its advice about ``OMP_NUM_THREADS`` above 1 are dropped while it loads.

Threads and GEMM: Paddle's CPU wheel multiplies matrices with MKL 2019.0.5 (MKLML) on
``OMP_NUM_THREADS`` threads, and sets ``OMP_NUM_THREADS=1`` when it loads unless the user set it: its
2048 x 2048 product ran on one core where TensorFlow's ran on every core. This module gives Paddle the
user's ``OMP_NUM_THREADS`` (as it was when d2lrnn was imported), else one thread per core, as the other
frameworks take. On AMD processors that MKL takes its slow generic code path unless
``MKL_DEBUG_CPU_TYPE=5`` is set before it loads, which this module does there (the user's own setting
stands). ``bench/RESULTS.md`` has the measurements.

The book's Paddle cells were written for Paddle 2, whose operators took an integer and a floating-point
tensor together (a float32 ``arange`` compared with int64 lengths, a loss times an int64 mask); Paddle 3
refuses such a pair, and while this module is loaded ``paddle.Tensor``'s arithmetic and comparison operators
compute it in the floating-point dtype instead. Every pair Paddle 3 computes itself is left to it, with one
shortcut to the same numbers: a tensor times a 0-d tensor (a learning rate, a clipping scale) runs Paddle's
scale kernel, six times faster than its broadcasting multiply (see ``_scaling``).
"""

import contextlib
import io
import math
import os
import sys
import warnings

import numpy as np

from . import _common

#: Lines Paddle prints on its Python stderr while it loads (about data parallelism) when OMP_NUM_THREADS > 1.
_LOADING_NOTICES = ("WARNING: OMP_NUM_THREADS set to", "PLEASE USE OMP_NUM_THREADS WISELY.")


def _import_quietly():
    """Import Paddle without its loading notices (any other line it prints is written back)."""
    printed = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(printed):
        warnings.filterwarnings("ignore", message="No ccache found")
        module = _common.require("paddle", "paddle")
    kept = "".join(line for line in printed.getvalue().splitlines(keepends=True)
                   if not line.startswith(_LOADING_NOTICES))
    if kept:
        sys.stderr.write(kept)
    return module


# The user's thread setting: read before Paddle loads (it sets OMP_NUM_THREADS=1 when unset), or as it was
# when d2lrnn was imported where the user imported Paddle first.
_user_threads = os.environ.get("OMP_NUM_THREADS") if "paddle" not in sys.modules \
    else _common.OMP_NUM_THREADS_AT_IMPORT
if _common.cpu_vendor() == "AuthenticAMD":
    os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")  # MKL 2019's AVX2 kernels on AMD (honoured to 2020.0)
paddle = _import_quietly()
F = paddle.nn.functional


def _threads(setting):
    """The thread count of an ``OMP_NUM_THREADS`` value, or one per core where it is unset or unreadable."""
    try:
        return max(1, int(setting))
    except (TypeError, ValueError):
        return os.cpu_count() or 1


paddle.base.core.set_num_threads(_threads(_user_threads))

#: Paddle 2's operators between an integer and a floating-point tensor (the book's Paddle cells were
#: written for them: ``paddle.arange(n, dtype=paddle.float32)[None, :] < valid_len[:, None]``, a float loss
#: times an integer mask); Paddle 3 raises a TypeError for them, and this module has them compute in the
#: floating-point dtype (Paddle 2 cast the right operand to the left one's). Nothing that Paddle 3 computes
#: changes: the cast is tried only where its operator has refused the pair.
_MIXED_OPERATORS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                    "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__rpow__",
                    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__")
_INTEGERS = (paddle.int8, paddle.int16, paddle.int32, paddle.int64, paddle.uint8)
_FLOATS = (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)


def _mixed(operator):
    def mixed(self, other):
        try:
            return operator(self, other)
        except TypeError:
            if not isinstance(other, paddle.Tensor):
                raise
            if self.dtype in _FLOATS and other.dtype in _INTEGERS:
                return operator(self, other.astype(self.dtype))
            if self.dtype in _INTEGERS and other.dtype in _FLOATS:
                return operator(self.astype(other.dtype), other)
            raise

    mixed.__name__, mixed.__doc__, mixed.d2lrnn_mixed = operator.__name__, operator.__doc__, True
    return mixed


for _name in _MIXED_OPERATORS:
    if not hasattr(getattr(paddle.Tensor, _name), "d2lrnn_mixed"):  # once, however often this module loads
        setattr(paddle.Tensor, _name, _mixed(getattr(paddle.Tensor, _name)))


def _scales(x, c):
    """Whether ``c``, a 0-d tensor, can scale the tensor ``x`` (not 0-d): the same floating-point dtype, and
    no gradient wanted for ``c``."""
    return c.dtype == x.dtype and x.dtype in _FLOATS and (c.stop_gradient or not paddle.is_grad_enabled())


def _scaling(multiply):
    """``*`` that multiplies by a 0-d tensor with Paddle's scale kernel: its broadcasting multiply takes 310
    us for a (512, 512) matrix times a 0-d learning rate, the scale kernel 48 us (the SGD step and gradient
    clipping multiply every parameter so). The products are the same numbers, the sign of a zero included
    (the bias -0.0 adds nothing to any product); the scale kernel passes no gradient to its factor, so a
    factor that needs one goes to the multiply."""

    def mul(self, other):
        if isinstance(other, paddle.Tensor):  # shapes first: an empty shape is the cheapest test (0.2 us)
            if not other.shape and self.shape and _scales(self, other):
                return paddle.scale(self, other, bias=-0.0)
            if not self.shape and other.shape and _scales(other, self):
                return paddle.scale(other, self, bias=-0.0)
        return multiply(self, other)

    mul.__name__, mul.__doc__, mul.d2lrnn_scaling = multiply.__name__, multiply.__doc__, True
    return mul


if not hasattr(paddle.Tensor.__mul__, "d2lrnn_scaling"):
    paddle.Tensor.__mul__ = _scaling(paddle.Tensor.__mul__)

_DTYPES = {"float32": paddle.float32, "float64": paddle.float64, "int32": paddle.int32,
           "int64": paddle.int64, "bool": paddle.bool}


def _dtype(dtype):
    if dtype is None or isinstance(dtype, paddle.dtype):
        return dtype
    return _DTYPES[_common.numpy_dtype(dtype).name]


def _moved(x, device):
    """``x`` on ``device`` (itself where it is already there)."""
    if device is None or x.place == device:
        return x
    return x.cpu() if device == cpu() else x.cuda(device.get_device_id())


# -- creating and converting -------------------------------------------------------------


def normal(mean, std, shape, device=None):
    return from_numpy(_common.normal_numpy(mean, std, shape), device)


def uniform(low, high, shape, device=None):
    return from_numpy(_common.uniform_numpy(low, high, shape), device)


def _shape_list(shape):
    return [int(shape)] if isinstance(shape, (int, np.integer)) else [int(n) for n in shape]


def zeros(shape, dtype=None, device=None):
    return _moved(paddle.zeros(_shape_list(shape), dtype=_dtype(dtype) or paddle.float32), device)


def ones(shape, dtype=None, device=None):
    return _moved(paddle.ones(_shape_list(shape), dtype=_dtype(dtype) or paddle.float32), device)


def zeros_like(x):
    return paddle.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    return from_numpy(_common.arange_numpy(start, stop, step, _numpy_dtype(dtype)), device)


def _numpy_dtype(dtype):
    """A NumPy dtype for a NumPy or Paddle ``dtype`` (None stays None)."""
    if isinstance(dtype, paddle.dtype):
        return next(name for name, d in _DTYPES.items() if d == dtype)
    return dtype


def tensor(data, dtype=None, device=None):
    if isinstance(data, paddle.Tensor):
        return _moved(data if dtype is None else data.astype(_dtype(dtype)), device)
    return _moved(paddle.to_tensor(_common.as_numpy(data, _numpy_dtype(dtype))), device)


def from_numpy(array, device=None):
    return _moved(paddle.to_tensor(_common.as_numpy(array)), device)


def to_numpy(x):
    # Paddle's ``numpy()`` is a writable copy, without the gradient.
    return x.numpy() if isinstance(x, paddle.Tensor) else np.asarray(x)


def astype(x, dtype):
    return x.astype(_dtype(dtype))


def shape(x):
    return tuple(int(n) for n in x.shape)


def size(x):
    return math.prod(x.shape)


def is_tensor(x):
    return isinstance(x, paddle.Tensor)


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    return paddle.reshape(x, _shape_list(shape))


def transpose(x, axes=None):
    return paddle.transpose(x, list(axes) if axes is not None else list(reversed(range(x.ndim))))


def concat(tensors, axis=0):
    return paddle.concat(list(tensors), axis=axis)


def stack(tensors, axis=0):
    return paddle.stack(list(tensors), axis=axis)


def unstack(x, axis=0):
    axis = axis % x.ndim
    if axis == 0:
        return list(paddle.unbind(x, axis=0))  # views, each contiguous where x is
    # Along a later axis unbind's views are strided, and Paddle's elementwise kernels read strided operands
    # at about half speed where the data is not in cache (the LSTM's gates split from one (B, 4h) product:
    # ~50 us a step more than the split's copy costs): split copies each piece out once.
    return [paddle.squeeze(piece, axis) for piece in paddle.split(x, x.shape[axis], axis=axis)]


def take(x, indices, axis=0):
    axis = axis % x.ndim
    if axis == 0 and x.ndim == 2:
        return F.embedding(indices, x)  # a dense gradient, as the book's embedding layer's
    picked = paddle.index_select(x, indices.reshape([-1]), axis=axis)
    return picked.reshape(list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1:]))


# -- arithmetic ------------------------------------------------------------------------------


def _as_laid_out(x):
    """``(x or its transpose, whether it is the transpose)``: a 2-D transposed view of a contiguous matrix
    is handed to matmul as that matrix with its transpose flag. Paddle's strided ``transpose`` is a view,
    and its matmul copies a non-contiguous operand on every call (a (512, 2048) weight: 1.3 ms a product
    instead of 0.46 ms)."""
    if x.ndim != 2 or x.is_contiguous():
        return x, False
    x_T = paddle.transpose(x, [1, 0])
    return (x_T, True) if x_T.is_contiguous() else (x, False)


def matmul(a, b):
    (a, a_T), (b, b_T) = _as_laid_out(a), _as_laid_out(b)
    return paddle.matmul(a, b, transpose_x=a_T, transpose_y=b_T)


def dense(X, W, b):
    return matmul(X, W) + b


def linear(X, W, b=None):
    # X W^T, with W^T read as it lies where it is contiguous (``prepack_linear``'s weights, BPTT's
    # ``transpose(W_hh)``): see ``_as_laid_out``.
    W_T = paddle.transpose(W, [1, 0])
    Y = paddle.matmul(X, W_T) if W_T.is_contiguous() else paddle.matmul(X, W, transpose_y=True)
    return Y if b is None else Y + b


def prepack_linear(W):
    # W as a transposed view of a contiguous copy of W^T, which ``linear`` multiplies by as it lies: MKL
    # 2019's GEMM reads a transposed operand slower (a (32, 2048) x (2048, 512) product: 0.61 ms, 0.38 ms
    # plain). A W that already is such a view comes back as it is.
    W_T = paddle.transpose(W, [1, 0])
    return W if W_T.is_contiguous() else paddle.transpose(W_T.contiguous(), [1, 0])


def tanh(x):
    return paddle.tanh(x)


def tanh_grad(Y, dY):
    return paddle._C_ops.tanh_grad(Y, dY)  # the kernel paddle.tanh's own backward uses, itself differentiable


def sigmoid(x):
    return F.sigmoid(x)


def sigmoid_grad(Y, dY):
    return paddle._C_ops.sigmoid_grad(Y, dY)  # the kernel F.sigmoid's own backward uses (differentiable)


def relu(x):
    return F.relu(x)


def exp(x):
    return paddle.exp(x)


def sin(x):
    return paddle.sin(x)


def log(x):
    return paddle.log(x)


def sqrt(x):
    # Paddle's CPU kernel: up to 3.6 ulp off for arrays of 15 floats or more (a vectorised approximation;
    # correctly rounded through float64, but 4.5x slower, and Adam's update takes a sqrt of every weight)
    return paddle.sqrt(x)


def abs(x):  # noqa: A001
    return paddle.abs(x)


def _pair(x, y):
    if not isinstance(x, paddle.Tensor):
        x = paddle.full([], x, dtype=y.dtype)
    if not isinstance(y, paddle.Tensor):
        y = paddle.full([], y, dtype=x.dtype)
    return x, y


def maximum(x, y):
    return paddle.maximum(*_pair(x, y))


def minimum(x, y):
    return paddle.minimum(*_pair(x, y))


# -- reductions ------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return paddle.sum(x, axis=axis, keepdim=keepdims)


def mean(x, axis=None, keepdims=False):
    return paddle.mean(x, axis=axis, keepdim=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return paddle.max(x, axis=axis, keepdim=keepdims)


def argmax(x, axis=None):
    return paddle.argmax(x, axis=axis)


def sum_of_squares(tensors):
    return _common.sum_of_squares(tensors, sum)


def nonfinite_probe(tensors):
    return _common.nonfinite_probe(tensors, sum)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return F.one_hot(indices.astype(paddle.int64), depth).astype(paddle.float32)


# Paddle's softmax, log_softmax and cross_entropy kernels clip exponents at -64: softmax is never below
# e^-64 (1.6e-28 where it is 0), log_softmax never below -64, a cross-entropy never above 64. These are
# written with log-sum-exp instead, which is exact.


def _logsumexp(x, axis):
    """log sum_i exp(x_i) along ``axis`` (kept) as m + log sum_i exp(x_i - m), m the largest x_i (0 where it
    is infinite, so that an infinite x_i gives inf and a row of -inf gives -inf). Paddle's logsumexp kernel
    takes 370 us for a language model's (1120, 28) logits, these five operators 120 us. m is a constant for
    the gradient: the sum does not depend on it."""
    m = paddle.max(x, axis=axis, keepdim=True).detach()
    m = paddle.where(paddle.isfinite(m), m, paddle.zeros_like(m))
    return m + paddle.log(paddle.sum(paddle.exp(x - m), axis=axis, keepdim=True))


def softmax(x, axis=-1):
    return paddle.exp(log_softmax(x, axis))


def log_softmax(x, axis=-1):
    return x - _logsumexp(x, axis)


def softmax_cross_entropy(logits, labels):
    labels = labels.reshape([-1, 1]).astype(paddle.int64)
    return (_logsumexp(logits, -1) - paddle.take_along_axis(logits, labels, axis=-1))[:, 0]


# -- the recurrent layer ---------------------------------------------------------------------


_LAYERS = {"rnn": paddle.nn.SimpleRNN, "gru": paddle.nn.GRU, "lstm": paddle.nn.LSTM}
_CELLS = {"RNN_TANH": "rnn", "RNN_RELU": "rnn", "GRU": "gru", "LSTM": "lstm"}


def _build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after):
    direction = "bidirect" if bidirectional else "forward"
    return _LAYERS[cell](num_inputs, num_hiddens, num_layers, direction=direction, time_major=True,
                         dropout=dropout)


def _without_bias(layer):
    """Whether the layer was built with ``bias_ih_attr=False`` or ``bias_hh_attr=False``: Paddle then keeps
    a constant zero bias (``stop_gradient``) in the cells."""
    return any(getattr(cell, name).stop_gradient for cell in layer.sublayers()
               if isinstance(cell, paddle.nn.layer.rnn.RNNCellBase) for name in ("bias_ih", "bias_hh"))


def _describe(layer):
    if not isinstance(layer, paddle.nn.layer.rnn.RNNBase):
        return None, []
    # Either time_major: d2lrnn runs Paddle's kernel on time-major steps itself.
    unsupported = [setting for setting, bad in (
        ("activation='relu'", layer.mode == "RNN_RELU"),
        ("bias_ih_attr=False or bias_hh_attr=False", _without_bias(layer)),
        (f"proj_size={layer.proj_size}", layer.proj_size > 0)) if bad]
    cell = _CELLS.get(layer.mode, "rnn")
    return {"cell": cell, "num_inputs": layer.input_size, "num_hiddens": layer.hidden_size,
            "num_layers": layer.num_layers, "bidirectional": layer.num_directions == 2,
            "dropout": float(layer.dropout), "reset_after": cell == "gru"}, unsupported


#: The weights the recurrent kernel ran on while ``value_and_grad`` evaluates its function (see ``_call``).
_kernel_weights = []


def _call(layer, weights, X, states, training):
    # Paddle's fused recurrent kernel (what its layers' forward runs) on the given weights: every
    # layer-direction's [W_x, W_h] in order, then every one's [b_x, b_h].
    weight_list = [w for slot in weights for w in slot[:2]] + [b for slot in weights for b in slot[2:]]
    hx = [paddle.stack(list(s)) for s in zip(*states)]  # (H,) or (H, C), each (layers * directions, B, h)
    differentiated = paddle.is_grad_enabled() and any(not t.stop_gradient for t in [X, *hx, *weight_list])
    if differentiated:
        # The kernel's backward fails ("Required tensor shall not be nullptr") unless the gradient of
        # every weight in its list is wanted: a constant weight (d2lrnn's zero recurrent biases) becomes
        # a leaf, and ``value_and_grad`` asks for the gradients of every weight the kernel ran on.
        weight_list = [w if not w.stop_gradient else _leaf(w) for w in weight_list]
        _kernel_weights.extend(weight_list)
    # In test mode the kernel keeps nothing for a backward pass: only when nothing is differentiated.
    Y, _, out = paddle._C_ops.rnn(X, hx, weight_list, None, layer._dropout_state,
                                  float(layer.dropout) if training else 0.0, layer.num_directions == 2,
                                  layer.input_size, layer.hidden_size, layer.num_layers, layer.mode, 0,
                                  not (training or differentiated))
    return Y, [tuple(s[slot] for s in out) for slot in range(len(weights))]


_NATIVE = _common.NativeRNN(
    layer_names="paddle.nn.SimpleRNN, paddle.nn.GRU or paddle.nn.LSTM",
    gate_order=_common.CUDNN_GATE_ORDER, transposed=True, stacks_layers=True, gru_forms=(True,),
    build=_build, describe=_describe, call=_call)


def native_rnn():
    # ``paddle.nn.SimpleRNN``, ``GRU`` and ``LSTM``, declared for d2lrnn's adapter (see ``NativeRNN``):
    # the cuDNN layout (weights (gates * hiddens, inputs), GRU gates r, z, h reset after, LSTM i, f, c, o).
    return _NATIVE


def _assign(param, value):
    with paddle.no_grad():
        paddle.assign(value.detach() if isinstance(value, paddle.Tensor) else paddle.to_tensor(value), param)


def _set_grad(param, g):
    with paddle.no_grad():
        if param.grad is None:
            param.grad = g.detach().clone()
        else:
            paddle.assign(g, param.grad)


def _is_module(obj):
    return isinstance(obj, paddle.nn.Layer)


def _module_params(obj):
    return [p for p in obj.parameters() if not p.stop_gradient] if _is_module(obj) else None


@contextlib.contextmanager
def _parameters_replaced(module, params):
    """Run a block with ``params`` in place of the module's trainable parameters (``_module_params``
    order), in every sublayer that holds them, and in the weight list a recurrent layer hands its kernel."""
    by_id = {id(own): new for own, new in zip(_module_params(module), params)}
    saved = []
    for layer in module.sublayers(include_self=True):
        for name, own in list(layer._parameters.items()):
            if own is not None and id(own) in by_id:
                saved.append((layer._parameters, name, own))
                layer._parameters[name] = by_id[id(own)]
        if isinstance(layer, paddle.nn.layer.rnn.RNNBase) and layer.could_use_cudnn:
            saved.append((layer.__dict__, "_all_weights", layer._all_weights))
            layer.__dict__["_all_weights"] = [by_id.get(id(w), w) for w in layer._all_weights]
    try:
        yield
    finally:
        for where, name, own in reversed(saved):
            where[name] = own


def _call_with(module, params, *args, training=None):
    modes = [(layer, layer.training) for layer in module.sublayers(include_self=True)]
    if training is not None:
        module.train() if training else module.eval()
    try:
        with _parameters_replaced(module, params):
            return module(*args)
    finally:
        for layer, mode in modes:
            layer.training = mode


_IN_PLACE_HOOKS = _common.InPlaceHooks(grad=lambda p: p.grad, set_grad=_set_grad, assign=_assign,
                                       is_variable=lambda x: False, is_module=_is_module,
                                       module_params=_module_params, call_with=_call_with,
                                       device_keyword=None,
                                       module_bases=(paddle.nn.Layer, paddle.nn.Layer, "forward"))


def in_place_hooks():
    # ``loss.backward()`` attaches ``.grad`` to every tensor with ``stop_gradient=False``; the book's
    # ``sgd`` and ``grad_clipping`` rewrite parameters and gradients in place (see ``InPlaceHooks``). The
    # book's Paddle modules make their state without a device (``begin_state(batch_size=1)``).
    return _IN_PLACE_HOOKS


def dropout(x, p):
    return F.dropout(x, p, training=True)


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    # Seed the shared NumPy generator and Paddle's own (used by dropout).
    _common.seed(seed)
    paddle.seed(int(seed))


def detach(x):
    return x.detach()


def _leaf(p):
    leaf = p.detach()
    leaf.stop_gradient = False
    return leaf


def _contiguous(g):
    """A gradient laid out as its parameter: the recurrent kernel's weight gradients come back through the
    transposes that fed it, as strided views, and Paddle's elementwise kernels read a strided (512, 512)
    matrix about ten times slower (850 us against 66 us for g * g), in clipping and in the update alike."""
    return g if g.is_contiguous() else g.contiguous()


def value_and_grad(f, has_aux=False):
    # ``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with ``paddle.grad``, which also
    # asks for the gradients of the weights a recurrent kernel ran on (see ``_call``), then drops them.

    def wrapped(params, *args):
        leaves = [_leaf(p) for p in params]
        outer = len(_kernel_weights)
        try:
            out = f(leaves, *args)
            own = {id(leaf) for leaf in leaves}
            kernel_weights = list({id(w): w for w in _kernel_weights[outer:] if id(w) not in own}.values())
        finally:
            del _kernel_weights[outer:]
        value, aux = out if has_aux else (out, None)
        # A value that depends on no parameter has zero gradients, as on the other backends.
        grads = [None] * len(leaves) if value.stop_gradient else \
            paddle.grad(value, leaves + kernel_weights, allow_unused=True)[:len(leaves)]
        grads = [paddle.zeros_like(p) if g is None else _contiguous(g) for p, g in zip(leaves, grads)]
        value = value.detach()
        if has_aux:
            return (value, _common.tree_map(detach, aux)), grads
        return value, grads

    return wrapped


def custom_vjp(fwd, bwd, differentiable=False):

    class Function(paddle.autograd.PyLayer):
        @staticmethod
        def forward(ctx, *args):
            outputs, residuals = fwd(*args)
            ctx.residuals = _common.tree_map(detach, residuals)
            ctx.outputs = [(o.shape, o.dtype) for o in outputs]
            # Paddle takes one gradient per tensor argument, None for one it does not differentiate.
            ctx.differentiated = [None if not isinstance(a, paddle.Tensor) else not a.stop_gradient
                                  for a in args]
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *gs):
            gs = [paddle.zeros(s, d) if g is None else g for g, (s, d) in zip(gs, ctx.outputs)]
            grads = bwd(ctx.residuals, *gs)
            return tuple(g if used else None for g, used in zip(grads, ctx.differentiated)
                         if used is not None)

    return Function.apply


def scan(step, carry, xs, reverse=False, unroll=False):
    # A Python loop: each input unstacked once, each output stacked once.
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def compile(fn, calls="many", key=None):  # noqa: A001
    # Eager Paddle, as eager PyTorch: the step itself.
    return fn


def autocast(dtype, device=None):
    return None  # not one d2lrnn uses (paddle.amp.auto_cast is not tried here)


def try_gpu(i=0):
    return paddle.CUDAPlace(i) if num_gpus() > i else cpu()


def cpu():
    return paddle.CPUPlace()


def num_gpus():
    # How many CUDA GPUs Paddle sees (none with the CPU wheel).
    return paddle.device.cuda.device_count()


def to_device(x, device):
    return _moved(x, device)


def device_of(x):
    return x.place


def set_num_threads(n):
    # The threads of Paddle's CPU kernels (MKL and oneDNN's OpenMP pool); changes at once.
    paddle.base.core.set_num_threads(int(n))
