"""Every differentiable shim function's gradient, on the active backend, against finite differences.

The parity tests compare each backend with the NumPy backend, so on NumPy they compare NumPy with
itself and check none of its own gradient rules (the HIPS autograd primitives in
``d2lrnn/backends/numpy.py``). Here every backend, NumPy included, is held to central finite
differences of its own forward pass (``tests/gradcheck.py``): the gradient of
``sum_k sum(out_k * R_k)`` (fixed random ``R_k``) from the shim's ``value_and_grad`` must match.

Precision: float64 wherever the backend computes in float64 (inputs through the shim's
``tensor(a, dtype='float64')``), with eps 1e-6, rtol 1e-6, atol 1e-7 (:data:`gradcheck.FLOAT64`,
justified there). Every backend computes every case in float64 except: ``astype`` from and to
float32 (float32 by definition), and the shim's default RNN layer on TensorFlow: Keras's
SimpleRNN computes in float32 whatever its inputs (its float32 dtype policy casts them), so the
float64 checks build a float64 Keras layer directly, inside the test, and the default layer is
checked in float32 (eps 3e-3, rtol/atol 1e-3, :data:`gradcheck.FLOAT32`, justified there; on
every backend, as the concise model uses it).

Kinks: inputs of abs, relu, maximum and minimum stay at least 0.2 from the kink, and inputs of max
have entries at least 0.2 apart (no ties), so a step of eps never crosses a kink.

``tanh_grad(Y, dY) = dY (1 - Y^2)`` and ``sigmoid_grad(Y, dY) = dY Y (1 - Y)`` are differentiable w.r.t.
both inputs on every backend (torch's ``tanh_backward`` / ``sigmoid_backward``, TensorFlow's ``TanhGrad`` /
``SigmoidGrad`` and Paddle's kernels have gradients of their own; NumPy and MXNet switch to the composed
form while recording): both are checked, and the forward pass used by the finite
differences is the fused kernel, so the check also ties the fused and the composed forms together.
"""

import warnings

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.backends import SHIM_FUNCTIONS
from d2lrnn.models.bptt import rnn_tanh_scan
from tests import gradcheck
from tests.backends.shared import product_and_tanh_sum
from tests.gradcheck import FLOAT32, FLOAT64, check_gradient

_r = np.random.default_rng(20240611)


def normal(*shape, scale=1.0):
    return _r.standard_normal(shape) * scale


def away_from(kink, *shape, gap=0.2):
    """Normal samples moved at least ``gap`` away from ``kink`` (on their own side of it)."""
    n = _r.standard_normal(shape)
    return kink + np.where(n >= 0, 1.0, -1.0) * (gap + np.abs(n))


def apart_from(x, gap=0.2):
    """Samples that differ from ``x`` by at least ``gap`` in every entry (for maximum/minimum)."""
    return away_from(0.0, *x.shape, gap=gap) + x


def distinct(*shape):
    """Entries at least 0.2 apart from each other: no ties for max, whatever the axis."""
    n = int(np.prod(shape))
    return ((_r.permutation(n) - n / 2) * 0.25 + _r.uniform(0, 0.05, n)).reshape(shape)


def positive(*shape):
    return _r.uniform(0.5, 2.0, shape)


def ints(high, *shape):
    return _r.integers(0, high, shape).astype(np.int64)


def op(name, *args, **kwargs):
    """``lambda x, ...: ops.<name>(x, ..., *args, **kwargs)``, looked up on each call."""
    return lambda *tensors: getattr(ops, name)(*tensors, *args, **kwargs)


class Case:
    """One gradient check: ``fn(*inputs)`` differentiated w.r.t. ``wrt`` (default: float inputs)."""

    def __init__(self, fn, inputs, tol=FLOAT64, wrt=None, shape=None):
        self.fn, self.inputs, self.tol, self.wrt, self.shape = fn, inputs, tol, wrt, shape

    def run(self):
        if self.shape is not None:  # the output's shape as NumPy defines it (reductions' keepdims)
            out = self.fn(*(gradcheck.to_backend(a, self.tol.dtype) for a in self.inputs))
            assert ops.shape(out) == self.shape
        check_gradient(self.fn, self.inputs, self.tol, self.wrt)


class Special:
    """A check that does not fit ``check_gradient`` alone (written out as a function below).

    It draws its data when it runs, from the generator reseeded with ``seed``: the same numbers
    whichever tests ran before it (the cases' data is drawn once, when this module is imported).
    """

    def __init__(self, fn, seed):
        self.fn, self.seed = fn, seed

    def run(self):
        global _r
        _r = np.random.default_rng(self.seed)
        self.fn()


# -- custom_vjp with hand-written backward passes known to be right ------------------------------


def _cube_scaled(x, c):
    """x^3 * c (c is not differentiated below: an input outside the recorded graph)."""
    def fwd(x, c):
        return (x * x * x * c,), (x, c)

    def bwd(res, g):
        x, c = res
        return g * 3.0 * x * x * c, g * x * x * x

    return ops.custom_vjp(fwd, bwd)(x, c)


def _custom_vjp_nested(a, b):
    """Two calls of one custom function, the second on the first's output (residuals per call)."""
    prod, s = product_and_tanh_sum(a, b)
    return product_and_tanh_sum(prod, s * a)


# -- scan ------------------------------------------------------------------------------------------


def _scan_rnn(H0, X, W, reverse=False, unroll=False):
    """H_t = tanh(H_{t-1} W + X_t), y_t = H_t * X_t: gradients through the carry, the slices and W."""
    def step(H, x):
        H = ops.tanh(ops.matmul(H, W) + x)
        return H, H * x

    return ops.scan(step, H0, X, reverse, unroll)


def _scan_tuples(H0, C0, X, Z, W, reverse=False):
    """Tuples of carries, inputs and outputs (an LSTM-like cell)."""
    def step(carry, inputs):
        (H, C), (x, z) = carry, inputs
        C = C * ops.sigmoid(z) + x
        H = ops.tanh(ops.matmul(H, W) + C)
        return (H, C), (H, C * z)

    return ops.scan(step, (H0, C0), (X, Z), reverse)


# -- the library's own users of custom_vjp --------------------------------------------------------


def _book_rnn(inputs, W_xh, W_hh, b_h, W_hq, b_q, H):
    Y, (H_T,) = d2l.rnn(inputs, (H,), [W_xh, W_hh, b_h, W_hq, b_q])
    return Y, H_T


def _scratch_params(V, h):
    return [normal(V, h, scale=0.5), normal(h, h, scale=0.5), normal(h, scale=0.5),
            normal(h, V, scale=0.5), normal(V, scale=0.5)]


# Token indices (num_steps 3, batch 2) over a vocabulary of 5: tokens 1 and 3 repeat, so the row
# gather's gradient must add rows up; token 4 does not occur (its row's gradient is zero).
_TOKENS = np.array([[1, 3], [3, 0], [1, 2]], np.int64)


# -- native_rnn, dropout ---------------------------------------------------------------------------


def _float64_native(cell, num_inputs, num_hiddens, num_layers, bidirectional):
    """The framework's layer for ``cell`` computing in float64, behind d2lrnn's adapter.

    Keras layers need dtype='float64' (their default float32 policy casts float64 inputs down), so
    they are built here and wrapped; the other frameworks' layers compute in their inputs' dtype.
    On NumPy (no framework layers) the adapter runs the cell's own recurrence.
    """
    from d2lrnn.models import NativeLayer

    if d2l.backend_name() == "tensorflow":
        import tensorflow as tf

        keras = tf.keras.layers
        cls = {"rnn": keras.SimpleRNN, "gru": keras.GRU, "lstm": keras.LSTM}[cell]
        layers = [cls(num_hiddens, dtype="float64") for _ in range(num_layers)]
        if bidirectional:
            layers = [tf.keras.layers.Bidirectional(layer, dtype="float64") for layer in layers]
        return NativeLayer.wrap(layers, num_inputs)
    return NativeLayer(cell, num_inputs, num_hiddens, num_layers, bidirectional)


def _check_native_layer(cell, num_layers=1, bidirectional=False):
    """The layer w.r.t. the book-layout parameters (mapped to its own layout), its inputs and its state."""
    # Every parameter is perturbed twice: 2 inputs and 2 hidden units keep a 2-layer bidirectional
    # stack to a few hundred evaluations of the framework's layer.
    num_inputs, h = (3, 4) if num_layers == 1 else (2, 2)
    layer = _float64_native(cell, num_inputs, h, num_layers, bidirectional)
    params = [normal(*shape, scale=0.5) for shape in layer.shapes()]
    state = [normal(2, h, scale=0.5) for _ in layer.begin_state(2)]
    n = len(params)

    def forward(*args):
        Y, new_state = layer.forward(list(args[:n]), args[n], tuple(args[n + 1:]))
        return (Y, *new_state)

    check_gradient(forward, params + [normal(3, 2, num_inputs)] + state, FLOAT64, compiled=True,
                   what=f"{cell} layer, {num_layers} layer(s), {2 if bidirectional else 1} direction(s)")


def _check_dropout():
    def forward(x):
        d2l.manual_seed(3)  # the same mask at every evaluation
        return ops.dropout(x, 0.4)

    check_gradient(forward, [normal(4, 5)], FLOAT64, what="dropout")


# -- detach, value_and_grad with aux, compile -----------------------------------------------------


def _check_detach():
    # d/dx sum(detach(x) * x * R) = x * R: the detached factor is a constant. Finite differences of
    # the forward pass would give 2 x R, so the expected gradient is written out instead.
    x, R = normal(3, 4), normal(3, 4)
    _, (grad,) = ops.value_and_grad(
        lambda p: ops.sum(ops.detach(p[0]) * p[0] * ops.tensor(R, dtype="float64")))(
        [ops.tensor(x, dtype="float64")])
    np.testing.assert_allclose(ops.to_numpy(grad), x * R, rtol=1e-12, atol=0)
    # and nothing at all flows through a detached tensor alone (HIPS autograd warns that the output
    # does not depend on the input: that is the point here)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Output seems independent of input")
        _, (grad,) = ops.value_and_grad(lambda p: ops.sum(ops.tanh(ops.detach(p[0]))))(
            [ops.tensor(x, dtype="float64")])
    np.testing.assert_array_equal(ops.to_numpy(grad), np.zeros_like(x))


def _check_value_and_grad_aux():
    # has_aux: the gradient is the first output's alone; the aux output comes back as computed.
    W, X, R = normal(4, 3), normal(5, 4), normal(5, 3)
    tensors = [ops.tensor(a, dtype="float64") for a in (W, X, R)]

    def f(params, X, R):
        H = ops.tanh(ops.matmul(X, params[0]))
        return ops.sum(H * R), (H, ops.sum(H * H))

    (value, (H, H2)), (grad,) = ops.value_and_grad(f, has_aux=True)([tensors[0]], *tensors[1:])
    np.testing.assert_allclose(ops.to_numpy(H), np.tanh(X @ W), rtol=1e-12)
    np.testing.assert_allclose(float(ops.to_numpy(H2)), np.sum(np.tanh(X @ W) ** 2), rtol=1e-12)
    np.testing.assert_allclose(float(ops.to_numpy(value)), np.sum(np.tanh(X @ W) * R), rtol=1e-12)
    numeric = gradcheck.numeric_gradient(
        lambda args: float(ops.to_numpy(f([args[0]], args[1], args[2])[0])), [W, X, R], [0], FLOAT64)
    gradcheck.assert_gradients_close([grad], numeric, [W, X, R], [0], FLOAT64, "value_and_grad(has_aux)")


def _softmax_regression_loss(W1, W2, b, X, y):
    return ops.mean(ops.softmax_cross_entropy(ops.linear(ops.tanh(ops.matmul(X, W1)), W2, b), y))


def _check_compiled_step():
    # A training step through compile (tf.function on TensorFlow): its gradient against finite
    # differences of the (eager) loss, and its update.
    lr = 0.5

    def step(params, X, y):
        loss, grads = ops.value_and_grad(lambda p, X, y: _softmax_regression_loss(*p, X, y))(params, X, y)
        return loss, grads, [p - lr * g for p, g in zip(params, grads)]

    arrays, wrt = gradcheck.prepare([normal(4, 3), normal(5, 3), normal(5), normal(6, 4), ints(5, 6)],
                                    FLOAT64, wrt=[0, 1, 2])
    tensors = [gradcheck.to_backend(a, FLOAT64.dtype) for a in arrays]
    compiled = ops.compile(step)
    for _ in range(2):  # the second call runs the traced graph (TensorFlow)
        loss, grads, new_params = compiled(tensors[:3], *tensors[3:])
    np.testing.assert_allclose(float(ops.to_numpy(loss)),
                               float(ops.to_numpy(_softmax_regression_loss(*tensors))), rtol=1e-12)
    numeric = gradcheck.numeric_gradient(
        lambda args: float(ops.to_numpy(_softmax_regression_loss(*args))), arrays, wrt, FLOAT64)
    gradcheck.assert_gradients_close(grads, numeric, arrays, wrt, FLOAT64, "compiled step")
    for p, g, new in zip(tensors[:3], grads, new_params):
        np.testing.assert_allclose(ops.to_numpy(new), ops.to_numpy(p) - lr * ops.to_numpy(g), rtol=1e-12)


# -- the table ------------------------------------------------------------------------------------

_x34 = normal(3, 4)

#: shim function -> its gradient checks. Differentiated: every float input unless ``wrt`` says.
CASES = {
    "matmul": [Case(op("matmul"), [normal(3, 5), normal(5, 4)]),
               Case(op("matmul"), [normal(2, 3, 5), normal(2, 5, 4)]),
               # a stack of rows times one matrix (the decoder's output layer): one 2-D product
               Case(op("matmul"), [normal(2, 3, 5), normal(5, 4)])],
    "linear": [Case(op("linear"), [normal(5, 3), normal(4, 3)]),
               Case(op("linear"), [normal(5, 3), normal(4, 3), normal(4)]),
               Case(op("linear"), [normal(5, 3), normal(4, 3), normal(5, 4)]),  # a whole-matrix bias
               Case(op("linear"), [normal(5, 3), normal(4, 3), normal(1, 4)]),  # a broadcast row
               # a weight that is a transposed view (NumPy's other product form; as BPTT passes W_hh^T)
               Case(lambda X, W_t, b: ops.linear(X, ops.transpose(W_t), b),
                    [normal(5, 3), normal(3, 4), normal(5, 4)])],
    "prepack_linear": [Case(lambda X, W, b: ops.linear(X, ops.prepack_linear(W), b),
                            [normal(5, 3), normal(4, 3), normal(5, 4)]),
                       Case(lambda X, W_t: ops.linear(X, ops.prepack_linear(ops.transpose(W_t))),
                            [normal(5, 3), normal(3, 4)])],
    "tanh": [Case(op("tanh"), [normal(3, 4, scale=2.0)])],
    "tanh_grad": [Case(op("tanh_grad"), [np.tanh(normal(3, 4)), normal(3, 4)]),  # w.r.t. Y and dY
                  Case(op("tanh_grad"), [np.tanh(normal(3, 4)), normal(3, 4)], wrt=[0]),
                  Case(op("tanh_grad"), [np.tanh(normal(3, 4)), normal(3, 4)], wrt=[1])],
    "sigmoid": [Case(op("sigmoid"), [normal(3, 4, scale=4.0)])],
    "sigmoid_grad": [Case(op("sigmoid_grad"), [1 / (1 + np.exp(-normal(3, 4))), normal(3, 4)]),
                     Case(op("sigmoid_grad"), [1 / (1 + np.exp(-normal(3, 4))), normal(3, 4)], wrt=[0]),
                     Case(op("sigmoid_grad"), [1 / (1 + np.exp(-normal(3, 4))), normal(3, 4)], wrt=[1])],
    "relu": [Case(op("relu"), [away_from(0.0, 3, 4)])],
    "exp": [Case(op("exp"), [normal(3, 4)])],
    "sin": [Case(op("sin"), [normal(3, 4, scale=2.0)])],
    "log": [Case(op("log"), [positive(3, 4)])],
    "sqrt": [Case(op("sqrt"), [positive(3, 4)])],
    "abs": [Case(op("abs"), [away_from(0.0, 3, 4)])],
    "maximum": [Case(lambda x: ops.maximum(x, 0.25), [away_from(0.25, 3, 4)]),
                Case(lambda x: ops.maximum(-0.5, x), [away_from(-0.5, 3, 4)]),
                Case(op("maximum"), [_x34, apart_from(_x34)])],
    "minimum": [Case(lambda x: ops.minimum(x, 0.25), [away_from(0.25, 3, 4)]),
                Case(lambda x: ops.minimum(-0.5, x), [away_from(-0.5, 3, 4)]),
                Case(op("minimum"), [_x34, apart_from(_x34)])],
    "sum_of_squares": [Case(lambda a, b: ops.sum_of_squares([a, b]), [normal(3, 4), normal(5)], shape=())],
    "sum": [Case(op("sum"), [normal(3, 4)], shape=()),
            Case(op("sum", 1, True), [normal(3, 4)], shape=(3, 1)),
            Case(op("sum", -1), [normal(2, 3, 4)], shape=(2, 3)),
            Case(op("sum", 0), [normal(2, 3, 4)], shape=(3, 4)),
            Case(op("sum", None, True), [normal(3, 4)], shape=(1, 1))],
    "mean": [Case(op("mean"), [normal(3, 4)], shape=()),
             Case(op("mean", 0), [normal(3, 4)], shape=(4,)),
             Case(op("mean", -1, True), [normal(2, 3, 4)], shape=(2, 3, 1)),
             Case(op("mean", None, True), [normal(3, 4)], shape=(1, 1))],
    "max": [Case(op("max"), [distinct(3, 4)], shape=()),
            Case(op("max", -1), [distinct(3, 4)], shape=(3,)),
            Case(op("max", 0, True), [distinct(3, 4)], shape=(1, 4)),
            Case(op("max", 1), [distinct(2, 3, 4)], shape=(2, 4)),
            Case(op("max", None, True), [distinct(3, 4)], shape=(1, 1))],
    "softmax": [Case(op("softmax"), [normal(4, 6, scale=2.0)]),
                Case(op("softmax", 0), [normal(4, 6, scale=2.0)])],
    "log_softmax": [Case(op("log_softmax"), [normal(4, 6, scale=2.0)]),
                    Case(op("log_softmax", 0), [normal(4, 6, scale=2.0)])],
    # w.r.t. the logits; integer labels, several rows sharing a label
    "softmax_cross_entropy": [Case(op("softmax_cross_entropy"), [normal(8, 6, scale=2.0), ints(6, 8)]),
                              Case(op("softmax_cross_entropy"),
                                   [normal(5, 3), np.array([2, 0, 2, 2, 1], np.int64)])],
    "reshape": [Case(op("reshape", (4, -1)), [normal(2, 3, 4)])],
    "transpose": [Case(op("transpose"), [normal(2, 3)]),
                  Case(op("transpose", (2, 0, 1)), [normal(2, 3, 4)])],
    "concat": [Case(lambda a, b: ops.concat((a, b), 1), [normal(3, 1), normal(3, 4)]),
               Case(lambda a, b, c: ops.concat([a, b, c], 0), [normal(1, 4), normal(4, 4), normal(2, 4)]),
               Case(lambda a, b: ops.concat([a, b], -1), [normal(2, 3, 2), normal(2, 3, 1)])],
    "stack": [Case(lambda a, b: ops.stack([a, b]), [normal(3, 2), normal(3, 2)]),
              Case(lambda a, b, c: ops.stack((a, b, c), 1), [normal(3, 2), normal(3, 2), normal(3, 2)]),
              Case(lambda a, b: ops.stack([a, b], -1), [normal(3, 2), normal(3, 2)])],
    "unstack": [Case(op("unstack"), [normal(3, 2, 4)]),
                Case(op("unstack", 1), [normal(3, 2, 4)]),
                Case(op("unstack", -1), [normal(3, 2, 2)])],
    # w.r.t. the table; integer indices, repeated (their rows' gradients add up), some rows unused
    "take": [Case(op("take"), [normal(6, 3), np.array([[0, 2, 2], [5, 0, 2]], np.int64)]),
             Case(op("take"), [normal(6, 3), np.array([4, 4, 1, 4], np.int64)]),
             Case(op("take", 1), [normal(3, 5), np.array([[3, 0], [3, 3]], np.int64)]),
             Case(op("take"), [normal(4, 2, 3), np.array([1, 1, 3], np.int64)]),  # a 3-D table
             Case(op("take"), [normal(5), np.array([[0, 4], [4, 2]], np.int64)])],  # a vector
    "astype": [Case(op("astype", "float64"), [normal(3, 4)]),
               Case(lambda x: ops.tanh(ops.astype(x, "float64")), [normal(3, 4)], FLOAT32),  # from float32
               # to float32: the outputs are float32, so float32's step and tolerance (the input float64)
               Case(lambda x: ops.tanh(ops.astype(x, "float32")), [normal(3, 4)],
                    gradcheck.Tolerance("float64", FLOAT32.eps, FLOAT32.rtol, FLOAT32.atol))],
    "to_device": [Case(lambda x: ops.to_device(x, ops.cpu()) * 2.0, [normal(3, 4)]),
                  Case(lambda x: ops.exp(ops.to_device(x, ops.try_gpu())), [normal(3, 4)])],
    "detach": [Special(_check_detach, 1)],
    "custom_vjp": [
        Case(product_and_tanh_sum, [normal(3, 4), normal(3, 4)]),
        Case(lambda a, b: product_and_tanh_sum(a, b)[1], [normal(3, 4), normal(3, 4)]),  # one output used
        Case(_cube_scaled, [normal(3, 4), normal(3, 4)], wrt=[0]),  # a constant argument
        Case(_cube_scaled, [normal(3, 4), normal(3, 4)], wrt=[1]),
        Case(_custom_vjp_nested, [normal(3, 4), normal(3, 4)]),
        # the library's BPTT (d2lrnn.models.bptt): w.r.t. the input projections, H0 and W_hh
        Case(rnn_tanh_scan, [normal(4, 2, 3), normal(2, 3, scale=0.5), normal(3, 3, scale=0.5)]),
        Case(rnn_tanh_scan, [normal(1, 2, 3), normal(2, 3, scale=0.5), normal(3, 3, scale=0.5)]),  # T = 1
        # d2l.rnn, the book's model: token indices (a row gather), and float (one-hot-like) inputs
        Case(_book_rnn, [_TOKENS, *_scratch_params(5, 4), normal(2, 4, scale=0.5)]),
        Case(_book_rnn, [normal(3, 2, 5), *_scratch_params(5, 4), normal(2, 4, scale=0.5)]),
    ],
    # forward and in reverse (the outputs in the steps' order either way), one step too
    "scan": [Case(_scan_rnn, [normal(2, 3, scale=0.5), normal(4, 2, 3), normal(3, 3, scale=0.5)]),
             Case(lambda H0, X, W: _scan_rnn(H0, X, W, True),
                  [normal(2, 3, scale=0.5), normal(4, 2, 3), normal(3, 3, scale=0.5)]),
             Case(_scan_tuples, [normal(2, 3), normal(2, 3), normal(3, 2, 3), normal(3, 2, 3),
                                 normal(3, 3, scale=0.5)]),
             Case(lambda *a: _scan_tuples(*a, reverse=True),
                  [normal(2, 3), normal(2, 3), normal(3, 2, 3), normal(3, 2, 3), normal(3, 3, scale=0.5)]),
             Case(lambda H0, X, W: _scan_rnn(H0, X, W, True),
                  [normal(2, 3, scale=0.5), normal(1, 2, 3), normal(3, 3, scale=0.5)]),
             # unrolled where the backend compiles loops (JAX: T copies of the step)
             Case(lambda H0, X, W: _scan_rnn(H0, X, W, True, unroll=True),
                  [normal(2, 3, scale=0.5), normal(4, 2, 3), normal(3, 3, scale=0.5)])],
    # the frameworks' own layers as the concise models use them (NumPy: the cells' recurrences)
    "native_rnn": [Special(lambda: _check_native_layer("rnn"), 2),
                   Special(lambda: _check_native_layer("gru"), 3),
                   Special(lambda: _check_native_layer("lstm"), 4),
                   Special(lambda: _check_native_layer("gru", 2, True), 7),
                   Special(lambda: _check_native_layer("lstm", 2, True), 8)],
    "dropout": [Special(_check_dropout, 9)],
    # value_and_grad computes every analytic gradient in this table; besides, with has_aux:
    "value_and_grad": [Special(_check_value_and_grad_aux, 5)],
    "compile": [Special(_check_compiled_step, 6)],
    "dense": [Case(op("dense"), [normal(3, 5), normal(5, 4), normal(4)]),
              # a stack of rows (MXNet: FullyConnected with its bias)
              Case(op("dense"), [normal(2, 3, 5), normal(5, 4), normal(4)])],
}

#: Shim functions without a gradient to check, each with the reason.
NOT_DIFFERENTIABLE = {
    "normal": "draws from the random generator: no tensor input",
    "uniform": "draws from the random generator: no tensor input",
    "zeros": "a constant made from a shape",
    "ones": "a constant made from a shape",
    "zeros_like": "zeros whatever the values of its input: the gradient is zero by definition",
    "arange": "made from Python numbers",
    "tensor": "makes a new leaf tensor from Python data or an array",
    "from_numpy": "makes a new leaf tensor from a NumPy array",
    "to_numpy": "leaves the framework: NumPy arrays carry no gradient",
    "shape": "returns Python ints",
    "size": "returns a Python int",
    "is_tensor": "returns a Python bool",
    "argmax": "integer indices, piecewise constant in the input",
    "nonfinite_probe": "a check of the entries, 0 or not finite: nothing trains through it",
    "adam_update": "an optimizer's step, applied to gradients once they are taken",
    "one_hot": "made from integer indices",
    "manual_seed": "seeds the generators: returns nothing",
    "try_gpu": "returns a device",
    "cpu": "returns a device",
    "device_of": "returns a device",
    "num_gpus": "returns a Python int",
    "set_num_threads": "configures thread pools: returns nothing",
    "in_place_hooks": "declares in-place hooks (attached gradients, assignment): computes nothing itself",
    "autocast": "returns a context manager (or None) for mixed precision: computes nothing itself",
}


def test_every_shim_function_is_classified():
    # A new shim function must get gradient cases here or a reason why it has no gradient.
    unclassified = set(SHIM_FUNCTIONS) - set(CASES) - set(NOT_DIFFERENTIABLE)
    assert not unclassified, f"classify these shim functions in CASES or NOT_DIFFERENTIABLE: {unclassified}"
    assert not (set(CASES) | set(NOT_DIFFERENTIABLE)) - set(SHIM_FUNCTIONS), "not shim functions"
    assert not set(CASES) & set(NOT_DIFFERENTIABLE)
    assert all(CASES.values()) and all(NOT_DIFFERENTIABLE.values())


@pytest.mark.parametrize("name, case",
                         [(name, i) for name, cases in CASES.items() for i in range(len(cases))])
def test_gradient_matches_finite_differences(name, case):
    CASES[name][case].run()


def test_the_float64_path_keeps_float64():
    # The checks rely on tensor(a, dtype='float64') holding the numbers exactly (on torch, TensorFlow
    # and MXNet it used to go through from_numpy, which made them float32), and on float64 flowing
    # through value_and_grad.
    a = np.array([1.0 + 2.0 ** -40, -3.0])
    x = ops.tensor(a, dtype="float64")
    np.testing.assert_array_equal(ops.to_numpy(x), a)
    assert ops.to_numpy(ops.tensor([1, 2], dtype="int32")).dtype == np.int32
    value, (grad,) = ops.value_and_grad(lambda p: ops.sum(p[0] * p[0]))([x])
    assert ops.to_numpy(value).dtype == np.float64
    np.testing.assert_array_equal(ops.to_numpy(grad), 2 * a)


def test_the_check_catches_a_wrong_gradient():
    # The harness itself: a custom_vjp whose backward is off by a factor 1 + 1e-5 fails it.
    def fwd(x):
        return (ops.tanh(x),), (x,)

    def bwd(res, g):
        (x,) = res
        return (g * (1.0 - ops.tanh(x) ** 2) * (1.0 + 1e-5),)

    wrong = ops.custom_vjp(fwd, bwd)
    with pytest.raises(AssertionError, match="finite differences"):
        check_gradient(lambda x: wrong(x)[0], [normal(3, 4)])


def test_custom_vjp_keeps_no_output_alive_through_its_residuals():
    # A scan's residuals include its output (the stacked states). Kept as the same object, the
    # output's graph node holds the residuals and the residuals hold the output: a cycle through the
    # framework's C++ graph that leaked every training step's activations on torch (1.8 GB peak for
    # the LSTM) and MXNet (4.5 MB a step). With the garbage collector off, the first step's output
    # must be freed once the second step is done (NumPy's custom_vjp keeps the last call's, bounded).
    import gc
    import sys
    import weakref

    def fwd(x):
        y = ops.tanh(x)
        return (y,), (y,)

    def bwd(residuals, g):
        (y,) = residuals
        return (ops.tanh_grad(y, g),)

    scan = ops.custom_vjp(fwd, bwd)
    x = ops.from_numpy(np.linspace(-1, 1, 12).reshape(3, 4))

    def held_elsewhere(y):
        """A probe: whether anything but this probe still holds ``y``."""
        y = getattr(y, "_value", y)  # autograd's boxes take no weak references; their values do
        try:
            ref = weakref.ref(y)
            return lambda: ref() is not None
        except TypeError:  # MXNet's NDArray takes none either: count the references instead
            kept = [y]
            return lambda: sys.getrefcount(kept[0]) > 2  # the list's and the call's own

    def loss(params):
        (y,) = scan(params[0])
        refs.append(held_elsewhere(y))
        return ops.sum(y)

    refs = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            value, (grad,) = ops.value_and_grad(loss)([x])
            expected = 1 - np.tanh(np.linspace(-1, 1, 12).reshape(3, 4)) ** 2
            np.testing.assert_allclose(ops.to_numpy(grad), expected, rtol=1e-5)
            del value, grad
        assert not refs[0](), "the first step's custom_vjp output outlived it"
    finally:
        gc.enable()
