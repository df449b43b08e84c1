"""Every shim function, on the active backend, against the NumPy reference (values and gradients)."""

import ast
import importlib.util
import pathlib

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.backends import SHIM_FUNCTIONS, available_backends
from tests.backends.shared import book_sgd_and_clip, framework_gpu_count, product_and_tanh_sum
from tests.parity import assert_close, assert_parity

BACKENDS_DIR = pathlib.Path(d2l.__file__).parent / "backends"

_r = np.random.default_rng(42)


def f32(*shape):
    return _r.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return (_r.random(shape) + 0.5).astype(np.float32)


def ints(high, *shape):
    return _r.integers(0, high, shape).astype(np.int64)


def op(name):
    """Look the function up on each call: ``ops.tanh`` itself is bound to the backend active now."""
    return lambda *args, **kwargs: getattr(ops, name)(*args, **kwargs)


def _seeded_normal():
    ops.manual_seed(7)
    return ops.normal(0.5, 2.0, (3, 4))


def _seeded_uniform():
    ops.manual_seed(7)
    return ops.uniform(-0.5, 2.0, (3, 4))


def _vg(W, x):
    return ops.value_and_grad(lambda p, x: ops.sum(ops.tanh(ops.matmul(x, p[0]))))([W], x)


def _vg_aux(W, x):
    def f(p, x):
        H = ops.tanh(ops.matmul(x, p[0]))
        return ops.sum(H * H), (H,)

    return ops.value_and_grad(f, has_aux=True)([W], x)


def _compiled(W, x):
    def step(params, x):
        loss, grads = ops.value_and_grad(lambda p, x: ops.mean(ops.exp(ops.matmul(x, p[0]))))(
            params, x)
        return loss, [p - 0.1 * g for p, g in zip(params, grads)]

    return ops.compile(step)([W], x)


def _linear_transposed_weight(X, W_t, b):
    # a weight that is a transposed view (as the BPTT loop passes W_hh^T)
    return ops.linear(X, ops.transpose(W_t), b)


def _linear_prepacked(X, W, b):
    return ops.linear(X, ops.prepack_linear(W), b)


def _linear_transposed_prepacked(X, W_t, b):
    return ops.linear(X, ops.prepack_linear(ops.transpose(W_t)), b)


def _tanh_grad_recorded(x, dY):
    # tanh_grad while gradients are being recorded (as in a second-order use)
    return ops.tanh_grad(ops.tanh(x), dY)


def _sigmoid_grad_recorded(x, dY):
    # sigmoid_grad while gradients are being recorded (as in a second-order use)
    return ops.sigmoid_grad(ops.sigmoid(x), dY)


def _sigmoid_grad_cases():
    # Their own generator: the later cases keep the inputs the shared one gave them before.
    r = np.random.default_rng(7)
    Y, dY, x = (r.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    # x away from 0, where the second derivative's factor 1 - 2 sigmoid(x) cancels in float32 (the
    # gradient's relative error there is not the op's)
    x = np.sign(x) * (0.5 + np.abs(x))
    return [(op("sigmoid_grad"), [1 / (1 + np.exp(-Y)), dY], False), (_sigmoid_grad_recorded, [x, dY], True)]


def _custom_vjp_one_output_used(a, b):
    return product_and_tanh_sum(a, b)[0] * 3.0


def _native_lstm_forward(*args):
    """A two-layer bidirectional LSTM on the framework's layer (NumPy: the cell's recurrence)."""
    from d2lrnn.models import NativeLayer

    layer = NativeLayer("lstm", 3, 4, 2, True)
    n = len(layer.names)
    Y, state = layer.forward(list(args[:n]), args[n], tuple(args[n + 1:]))
    return (Y, *state)


def _lstm_inputs():
    from d2lrnn.models import RecurrentStack

    shapes = RecurrentStack("lstm", 3, 4, 2, True).shapes()
    return [f32(*shape) * 0.5 for shape in shapes] + [f32(5, 2, 3)] + [f32(2, 4) for _ in range(8)]


def _scan_rnn(H0, X, W):
    """One carry, one input, one output per step: H_t = tanh(H_{t-1} W + X_t), y_t = 2 H_t."""
    def step(H, x):
        H = ops.tanh(ops.matmul(H, W) + x)
        return H, H * 2.0

    return ops.scan(step, H0, X)


def _scan_tuples(H0, C0, X, Z, W, reverse):
    """Tuples of carries, inputs and outputs, the steps forward or in reverse."""
    def step(carry, inputs):
        (H, C), (x, z) = carry, inputs
        C = C * ops.sigmoid(z) + x
        H = ops.tanh(ops.matmul(H, W) + C)
        return (H, C), (H, C * z)

    (H, C), (Hs, Ps) = ops.scan(step, (H0, C0), (X, Z), reverse)
    return H, C, Hs, Ps


def _scan_no_outputs(H0, X):
    H, ys = ops.scan(lambda H, x: (ops.tanh(H + x), ()), H0, X, reverse=True)
    assert ys == ()
    return H


def _dropout_statistics(x):
    """What every framework's mask shares: zeros, or x / (1 - p); 4,000 draws keep about half (p = 0.5)."""
    y = ops.to_numpy(ops.dropout(x, 0.5))
    x = ops.to_numpy(x)
    kept = y != 0
    assert np.allclose(y[kept], 2 * x[kept], rtol=1e-6)  # survivors scaled by 1 / (1 - p)
    return np.array(kept.mean().round(1), dtype=np.float32)  # 0.5 +- 0.008 (one std): 0.5 after rounding


def _adam_step(P, G, M, V, weight_decay=0.0):
    """``adam_update`` at step 3 with lr 0.01, on two parameters."""
    scalars = ops.tensor(np.array([0.01, 1 / (1 - 0.9 ** 3), 1 / (1 - 0.999 ** 3)], np.float32))
    return ops.adam_update([P, G], [G, P], [M, M], [V, V], scalars, 0.9, 0.999, 1e-8, weight_decay)


# name -> list of (function, NumPy inputs, check gradients?)
CASES = {
    "normal": [(_seeded_normal, [], False)],
    "uniform": [(_seeded_uniform, [], False)],
    "zeros": [(lambda: ops.zeros((2, 3)), [], False)],
    "ones": [(lambda: ops.ones((2, 3)), [], False)],
    "zeros_like": [(op("zeros_like"), [f32(2, 3)], False)],
    "arange": [(lambda: ops.arange(5), [], False), (lambda: ops.arange(2, 11, 3), [], False),
               (lambda: ops.arange(0.0, 1.0, 0.25), [], False)],
    "tensor": [(lambda: ops.tensor([[1.5, 2.0], [3.0, 4.0]]), [], False),
               (lambda: ops.tensor([3, 1, 2]), [], False)],
    "from_numpy": [(lambda x: x * 1.0, [f32(2, 3)], True)],
    "to_numpy": [(op("to_numpy"), [f32(2, 3)], False)],
    "astype": [(lambda i: ops.astype(i, "float32") * 0.5, [ints(9, 4)], False)],
    "shape": [(op("shape"), [f32(2, 3, 4)], False)],
    "size": [(op("size"), [f32(2, 3, 4)], False)],
    "is_tensor": [(op("is_tensor"), [f32(2)], False)],
    "reshape": [(lambda x: ops.reshape(x, (4, -1)), [f32(2, 3, 4)], True)],
    "transpose": [(op("transpose"), [f32(2, 3)], True),
                  (lambda x: ops.transpose(x, (2, 0, 1)), [f32(2, 3, 4)], True)],
    "concat": [(lambda a, b: ops.concat((a, b), 1), [f32(3, 1), f32(3, 4)], True),
               (lambda a, b: ops.concat([a, b], 0), [f32(1, 4), f32(4, 4)], True)],
    "stack": [(lambda a, b: ops.stack([a, b], 1), [f32(3, 2), f32(3, 2)], True)],
    "unstack": [(lambda x: ops.unstack(x), [f32(3, 2, 4)], True),
                (lambda x: ops.unstack(x, 1), [f32(3, 2, 4)], True)],
    "take": [(lambda W, i: ops.take(W, i), [f32(6, 3), ints(6, 4, 5)], True),
             (lambda W, i: ops.take(W, i, 1), [f32(6, 3), ints(3, 2)], True)],
    "matmul": [(op("matmul"), [f32(3, 5), f32(5, 4)], True),
               (op("matmul"), [f32(2, 3, 5), f32(2, 5, 4)], True),
               (op("matmul"), [f32(2, 3, 5), f32(5, 4)], True),
               (op("matmul"), [f32(2, 1, 3, 5), f32(5, 4)], True)],
    "linear": [(op("linear"), [f32(5, 3), f32(4, 3)], True),
               (op("linear"), [f32(5, 3), f32(4, 3), f32(4)], True),
               (op("linear"), [f32(5, 3), f32(4, 3), f32(5, 4)], True),
               (_linear_transposed_weight, [f32(5, 3), f32(3, 4), f32(5, 4)], True)],
    "prepack_linear": [(_linear_prepacked, [f32(5, 3), f32(4, 3), f32(5, 4)], True),
                       (_linear_transposed_prepacked, [f32(5, 3), f32(3, 4), f32(5, 4)], True)],
    "tanh": [(op("tanh"), [f32(3, 4)], True)],
    "tanh_grad": [(op("tanh_grad"), [np.tanh(f32(3, 4)), f32(3, 4)], False),
                  (_tanh_grad_recorded, [f32(3, 4), f32(3, 4)], True)],
    "sigmoid": [(op("sigmoid"), [f32(3, 4) * 4], True)],
    "sigmoid_grad": _sigmoid_grad_cases(),
    "relu": [(op("relu"), [f32(3, 4)], True)],
    "exp": [(op("exp"), [f32(3, 4)], True)],
    "sin": [(op("sin"), [f32(3, 4)], True)],
    "log": [(op("log"), [pos(3, 4)], True)],
    "sqrt": [(op("sqrt"), [pos(3, 4)], True)],
    "abs": [(op("abs"), [f32(3, 4)], True)],
    "maximum": [(lambda x: ops.maximum(x, 0.25), [f32(3, 4)], True),
                (op("maximum"), [f32(3, 4), f32(3, 4)], True)],
    "minimum": [(lambda x: ops.minimum(x, 0.25), [f32(3, 4)], True)],
    "sum": [(op("sum"), [f32(3, 4)], True), (lambda x: ops.sum(x, 1, True), [f32(3, 4)], True)],
    "mean": [(op("mean"), [f32(3, 4)], True), (lambda x: ops.mean(x, 0), [f32(3, 4)], True)],
    "max": [(op("max"), [f32(3, 4)], True), (lambda x: ops.max(x, -1), [f32(3, 4)], True)],
    "argmax": [(lambda x: ops.argmax(x, 1), [f32(5, 7)], False), (op("argmax"), [f32(5, 7)], False)],
    "sum_of_squares": [(lambda a, b, c: ops.sum_of_squares([a, b, c]), [f32(3, 4), f32(5), f32(2, 3, 2)],
                        True)],
    "nonfinite_probe": [(lambda a, b: ops.nonfinite_probe([a, b]), [f32(3, 4), f32(5)], False)],
    # the step from moments already under way, with and without weight decay
    "adam_update": [(_adam_step, [f32(3, 4), f32(3, 4), f32(3, 4) * 0.1, pos(3, 4) * 0.01], False),
                    (lambda *a: _adam_step(*a, weight_decay=0.01), [f32(3, 4), f32(3, 4), f32(3, 4) * 0.1,
                                                                      pos(3, 4) * 0.01], False)],
    "one_hot": [(lambda i: ops.one_hot(i, 5), [ints(5, 2, 3)], False)],
    "softmax": [(op("softmax"), [f32(4, 6) * 3], True)],
    "log_softmax": [(op("log_softmax"), [f32(4, 6) * 3], True),
                    (lambda x: ops.log_softmax(x, 0), [f32(4, 6)], True)],
    "softmax_cross_entropy": [(op("softmax_cross_entropy"), [f32(8, 6) * 3, ints(6, 8)], True)],
    # Gradients here are sums over 5 steps x 2 sequences of O(1) terms that cancel to ~1e-2, so a
    # different (equally valid) float32 summation order moves them by ~1e-6 absolute: atol 1e-5.
    "native_rnn": [(_native_lstm_forward, _lstm_inputs(), True, {"atol": 1e-5})],
    # the same clipped step from P, G: ||G|| = 3 sqrt(12) ~ 10 > 1, so the clipping acts
    "in_place_hooks": [(book_sgd_and_clip, [f32(3, 4), np.full((3, 4), 3.0, np.float32)], False)],
    # each framework draws its own mask: compared are what every mask must give
    "dropout": [(_dropout_statistics, [f32(40, 100) + 5], False)],
    "manual_seed": [(_seeded_normal, [], False)],
    # d(detach(x) * x)/dx = x: the detached factor carries no gradient (2x if it did)
    "detach": [(lambda x: ops.detach(x) * x, [f32(2, 3)], True)],
    "value_and_grad": [(_vg, [f32(4, 3), f32(5, 4)], False),
                       (_vg_aux, [f32(4, 3), f32(5, 4)], False)],
    "custom_vjp": [(product_and_tanh_sum, [f32(3, 4), f32(3, 4)], True),
                   (_custom_vjp_one_output_used, [f32(3, 4), f32(3, 4)], True)],
    "compile": [(_compiled, [f32(4, 3), f32(5, 4)], False)],
    "try_gpu": [(lambda x: ops.to_device(x, ops.try_gpu()) + 1.0, [f32(2, 2)], False)],
    "cpu": [(lambda x: ops.to_device(x, ops.cpu()) + 1.0, [f32(2, 2)], False)],
    "num_gpus": [(lambda: ops.num_gpus() == framework_gpu_count(), [], False)],
    "to_device": [(lambda x: ops.to_device(x, ops.cpu()), [f32(2, 2)], True)],
    # a tensor made on x's device adds to x; to_device(x, None) leaves x as it is
    "device_of": [(lambda x: ops.to_device(x, None) + ops.ones((2, 2), device=ops.device_of(x)), [f32(2, 2)],
                   True)],
    "set_num_threads": [(lambda x: (ops.set_num_threads(2), x + 1.0)[1], [f32(2)], False)],
    # float32 asks for nothing to change: None, and the values as they were (bfloat16's: test_values.py)
    "autocast": [(lambda x: x + 1.0 if ops.autocast("float32") is None else None, [f32(2)], False)],
    "scan": [(_scan_rnn, [f32(2, 3), f32(4, 2, 3), f32(3, 3) * 0.5], True),
             (lambda *a: _scan_tuples(*a, False), [f32(2, 3), f32(2, 3), f32(5, 2, 3), f32(5, 2, 3),
                                                   f32(3, 3) * 0.5], True),
             (lambda *a: _scan_tuples(*a, True), [f32(2, 3), f32(2, 3), f32(5, 2, 3), f32(5, 2, 3),
                                                  f32(3, 3) * 0.5], True),
             (lambda *a: _scan_tuples(*a, True), [f32(2, 3), f32(2, 3), f32(1, 2, 3), f32(1, 2, 3),
                                                  f32(3, 3) * 0.5], True),  # one step
             (_scan_no_outputs, [f32(2, 3), f32(3, 2, 3)], True)],
    "dense": [(op("dense"), [f32(3, 5), f32(5, 4), f32(4)], True),
              (op("dense"), [f32(2, 3, 5), f32(5, 4), f32(4)], True)],  # MXNet: FullyConnected with its bias
}


def test_every_shim_function_has_a_parity_case():
    assert sorted(CASES) == sorted(SHIM_FUNCTIONS)


@pytest.mark.parametrize(
    "name, case",
    [(name, i) for name, cases in CASES.items() for i in range(len(cases))],
)
def test_shim_function_matches_numpy(name, case):
    fn, inputs, grad, *tolerance = CASES[name][case]
    assert_parity(fn, inputs, grad=grad, **(tolerance[0] if tolerance else {}))


def _signatures(path):
    """{function name: its parameters as written} for the top-level functions of a module's source."""
    tree = ast.parse(path.read_text())
    return {node.name: ast.unparse(node.args) for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def test_the_contract_declares_every_shim_function_once():
    declared = _signatures(BACKENDS_DIR / "_spec.py")
    assert list(declared) == list(SHIM_FUNCTIONS)
    assert all(ast.get_docstring(node) for node in ast.parse((BACKENDS_DIR / "_spec.py").read_text()).body
               if isinstance(node, ast.FunctionDef))


def test_the_shim_reference_in_docs_is_the_contracts():
    path = BACKENDS_DIR.parents[1] / "docs" / "make_shim_md.py"
    spec = importlib.util.spec_from_file_location("make_shim_md", path)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.OUT.read_text(encoding="utf-8") == generator.shim_reference(), \
        "docs/shim.md is out of date: run python docs/make_shim_md.py"


@pytest.mark.parametrize("name", available_backends())
def test_backend_module_defines_every_shim_function_with_the_contracts_signature(name):
    contract = _signatures(BACKENDS_DIR / "_spec.py")
    sigs = _signatures(BACKENDS_DIR / f"{name}.py")
    missing = [f for f in SHIM_FUNCTIONS if f not in sigs]
    assert not missing, f"backend {name} lacks {missing}"
    for f in SHIM_FUNCTIONS:
        assert sigs[f] == contract[f], f"{name}.{f}({sigs[f]}) differs from the contract's {f}({contract[f]})"


def test_active_backend_module_has_every_function_with_a_docstring():
    module = d2l.get_backend()
    for f in SHIM_FUNCTIONS:
        assert callable(getattr(module, f)), f
        assert getattr(module, f).__doc__, f"{d2l.backend_name()}.{f} has no docstring"


def test_float32_and_int64_defaults():
    floats = [ops.normal(0, 1, (2,)), ops.zeros(2), ops.ones(2), ops.tensor([1.5]),
              ops.from_numpy(np.ones(2)), ops.arange(0.0, 1.0, 0.5), ops.one_hot(ops.tensor([1]), 3)]
    for t in floats:
        assert ops.to_numpy(t).dtype == np.float32
    for t in [ops.arange(3), ops.tensor([1, 2]), ops.argmax(ops.tensor([[1.0, 3.0]]), 1)]:
        assert ops.to_numpy(t).dtype == np.int64
    # a number makes a 0-d tensor, and an explicit dtype is honoured
    assert ops.shape(ops.tensor(1.5)) == () and ops.shape(ops.tensor(2)) == ()
    assert ops.to_numpy(ops.tensor([1.5], dtype="float64")).dtype == np.float64


def test_book_aliases_and_top_level_names():
    x = ops.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert float(ops.to_numpy(d2l.reduce_sum(x))) == 10.0
    assert float(ops.to_numpy(d2l.reduce_mean(x))) == 2.5
    np.testing.assert_array_equal(d2l.numpy(x), [[1.0, 2.0], [3.0, 4.0]])
    assert d2l.matmul is d2l.get_backend().matmul


def test_value_and_grad_matches_hand_computed_gradient():
    # f(W) = sum((x W)^2)  =>  df/dW = 2 x^T (x W)
    x = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], np.float32)
    W = np.array([[0.2, -0.1, 0.4], [0.3, 0.5, -0.2]], np.float32)
    value, grads = ops.value_and_grad(lambda p, x: ops.sum(ops.matmul(x, p[0]) ** 2))(
        [ops.from_numpy(W)], ops.from_numpy(x))
    # float32 on both sides, sums of 2-3 terms: a few ulps (~1e-7), under 1e-6 relative
    np.testing.assert_allclose(float(ops.to_numpy(value)), np.sum((x @ W) ** 2), rtol=1e-6)
    np.testing.assert_allclose(ops.to_numpy(grads[0]), 2 * x.T @ (x @ W), rtol=1e-6)


def test_sgd_updates_follow_numpy():
    def sgd(W, b, X, y):
        loss_fn = ops.value_and_grad(
            lambda p, X, y: ops.mean(ops.softmax_cross_entropy(ops.matmul(X, p[0]) + p[1], y)))
        params, losses = [W, b], []
        for _ in range(5):
            loss, grads = loss_fn(params, X, y)
            params = [p - 0.5 * g for p, g in zip(params, grads)]
            losses.append(loss)
        return losses, params

    (losses, params), _ = assert_parity(sgd, [f32(4, 3), np.zeros(3, np.float32), f32(16, 4),
                                              ints(3, 16)])
    assert losses[-1] < losses[0]


def test_book_concatenation_demo():
    # The book's cells, verbatim.
    X, W_xh = d2l.normal(0, 1, (3, 1)), d2l.normal(0, 1, (1, 4))
    H, W_hh = d2l.normal(0, 1, (3, 4)), d2l.normal(0, 1, (4, 4))
    separate = d2l.matmul(X, W_xh) + d2l.matmul(H, W_hh)
    joined = d2l.matmul(d2l.concat((X, H), 1), d2l.concat((W_xh, W_hh), 0))
    assert d2l.shape(separate) == (3, 4)
    # the same 5 products summed in another order; entries of O(1) that may cancel to ~0: atol too
    assert_close(d2l.numpy(joined), d2l.numpy(separate), rtol=1e-5, atol=1e-5)


def test_custom_vjp_gradient_equals_automatic_gradient():
    a, b = f32(3, 4), f32(3, 4)

    def automatic(p):
        return ops.sum(p[0] * p[1] * 2.0 + ops.tanh(p[0] + p[1]))

    def custom(p):
        prod, tanh_sum = product_and_tanh_sum(p[0], p[1])
        return ops.sum(prod * 2.0 + tanh_sum)

    args = [[ops.from_numpy(a), ops.from_numpy(b)]]
    _, expected = ops.value_and_grad(automatic)(*args)
    _, actual = ops.value_and_grad(custom)(*args)
    for e, g in zip(expected, actual):  # the same terms in another order: float32 rounding (RTOL, ATOL)
        np.testing.assert_allclose(ops.to_numpy(g), ops.to_numpy(e), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", ["mean", "sum", "max"])
def test_gradient_reaching_a_custom_backward_stays_float32(reduce):
    # A float64 gradient flowing back from the loss would make every product in a hand-written
    # backward pass a slow mixed-precision one (autograd's mean gradient did this on NumPy 2).
    seen = []

    def fwd(x):
        return (x * 1.0,), None

    def bwd(residuals, g):
        seen.append(ops.to_numpy(g).dtype)
        return (g,)

    identity = ops.custom_vjp(fwd, bwd)
    x = ops.from_numpy(f32(3, 4))
    _, (grad,) = ops.value_and_grad(lambda p: getattr(ops, reduce)(identity(p[0])[0] * 2.0))([x])
    assert ops.to_numpy(grad).dtype == np.float32  # (also waits for MXNet's asynchronous backward)
    assert seen == [np.float32]


def test_tanh_grad_by_hand():
    Y = ops.from_numpy(np.array([[0.0, 0.5, -1.0]], np.float32))
    dY = ops.from_numpy(np.array([[2.0, 2.0, 3.0]], np.float32))
    # dY (1 - Y^2) by hand: 2 (1 - 0), 2 (1 - 0.25), 3 (1 - 1); exact in float32 but for the kernel's
    # own rounding
    np.testing.assert_allclose(ops.to_numpy(ops.tanh_grad(Y, dY)), [[2.0, 1.5, 0.0]], rtol=1e-6)


def test_linear_by_hand():
    X = ops.from_numpy(np.array([[1.0, 2.0]], np.float32))
    W = ops.from_numpy(np.array([[1.0, 0.0], [1.0, -1.0], [0.5, 0.5]], np.float32))
    np.testing.assert_allclose(ops.to_numpy(ops.linear(X, W)), [[1.0, -1.0, 1.5]])
    b = ops.from_numpy(np.array([[10.0, 20.0, 30.0]], np.float32))
    np.testing.assert_allclose(ops.to_numpy(ops.linear(X, W, b)), [[11.0, 19.0, 31.5]])
