"""Finite-difference gradient checks through the active backend (no reference backend involved).

:func:`check_gradient` takes the gradient of the scalar objective ``L = sum_k sum(out_k * R_k)``
(``out_k`` the float outputs of ``fn``, ``R_k`` fixed random weights, so every output element
counts with a different weight) with the shim's own ``value_and_grad``, and compares it element
by element with central differences of the same objective, evaluated through the same backend's
forward pass of ``fn``. The parity tests (``tests/parity.py``) compare a backend with the NumPy
backend; these checks hold every backend, NumPy included, to the mathematics instead.

Inputs are NumPy arrays, converted with ``ops.tensor(a, dtype=...)`` (the shim's float64 path)
for the float inputs and ``ops.from_numpy`` for the integer ones. The finite differences
perturb the NumPy array and convert it again, and divide by the step actually taken, i.e. the
difference of the two perturbed entries after rounding to the check's dtype. The objective of a
perturbed forward pass is summed in NumPy float64 from the backend's outputs, so the reduction
adds no rounding of its own to the difference.
"""

import dataclasses

import numpy as np

from d2lrnn import ops


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """The input dtype of a check, its finite-difference step and the allowed difference."""

    dtype: str
    eps: float
    rtol: float
    atol: float


# float64 (unit roundoff u = 1.1e-16). A central difference errs by eps^2 |f'''| / 6 (truncation)
# plus about u |L| / eps (rounding of the two objectives); u^(1/3) ~ 5e-6 balances the two, and
# with eps = 1e-6, third derivatives of O(1-10) and objectives |L| of O(1-100) each term is below
# ~1e-9 (measured: largest difference 2e-9 over all cases and backends). rtol 1e-6 plus atol 1e-7
# (for entries that are near zero) leaves a margin of 50x and still fails any gradient that is
# wrong by more than a part in a million.
FLOAT64 = Tolerance("float64", eps=1e-6, rtol=1e-6, atol=1e-7)

# float32 (u = 6e-8), only where an operation cannot run in float64. Each output carries a
# rounding error of ~u relative, so the difference errs by ~u |L| / eps, and the truncation is
# eps^2 |f'''| / 6: eps = 3e-3 ~ u^(1/3) balances the two at ~2e-5 for O(1) objectives (measured:
# largest difference 1.5e-4, in the RNN layer's gradients of up to ~6 accumulated over its steps).
# rtol and atol 1e-3 leave a margin of >10x and still fail a gradient that is off by a tenth of a
# percent (a halved or doubled one by far).
FLOAT32 = Tolerance("float32", eps=3e-3, rtol=1e-3, atol=1e-3)


def flatten(tree):
    """The tensors of nested tuples/lists, in order."""
    if isinstance(tree, (tuple, list)):
        return [t for sub in tree for t in flatten(sub)]
    return [tree]


def float_outputs(out):
    """Indices of the float tensors among the flattened outputs (integer outputs have no gradient)."""
    # (a NumPy-backend reduction to a scalar is a NumPy scalar, not an array)
    return [k for k, o in enumerate(flatten(out))
            if (ops.is_tensor(o) or isinstance(o, np.generic)) and ops.to_numpy(o).dtype.kind == "f"]


def to_backend(a, dtype):
    """A NumPy input as a tensor: float arrays in ``dtype``, integer arrays as int64."""
    if isinstance(a, np.ndarray):
        return ops.tensor(a, dtype=dtype) if a.dtype.kind == "f" else ops.from_numpy(a)
    return a  # a Python number or other non-tensor argument


def _weights(out, seed):
    """Fixed random weights R_k per float output: as tensors (the output's dtype) and as float64."""
    rng = np.random.default_rng(seed)
    flat = flatten(out)
    tensors, arrays = {}, {}
    for k in float_outputs(out):
        o = ops.to_numpy(flat[k])
        R = rng.standard_normal(o.shape).astype(o.dtype)  # rounded to the output's dtype once
        tensors[k], arrays[k] = ops.tensor(R, dtype=o.dtype), R.astype(np.float64)
    return tensors, arrays


def objective_value(out, weights):
    """sum_k sum(out_k * R_k), in NumPy float64 from the backend's outputs."""
    flat = flatten(out)
    return float(sum(np.sum(ops.to_numpy(flat[k]).astype(np.float64) * R) for k, R in weights.items()))


def numeric_gradient(objective, arrays, wrt, tol):
    """Central differences of ``objective(list of tensors) -> float`` w.r.t. ``arrays[i]``, i in wrt.

    ``arrays`` are NumPy arrays already in the check's dtype; each entry is moved by +-eps (in
    that dtype), and the difference is divided by the step actually taken after rounding.
    """
    tensors = [to_backend(a, tol.dtype) for a in arrays]
    grads = []
    for i in wrt:
        base = arrays[i]
        grad = np.zeros(base.shape, np.float64)
        for j in np.ndindex(base.shape):
            values = []
            for sign in (1, -1):
                moved = base.copy()
                moved[j] = base[j] + sign * base.dtype.type(tol.eps)
                args = list(tensors)
                args[i] = to_backend(moved, tol.dtype)
                values.append((objective(args), float(moved[j])))
            (up, x_up), (down, x_down) = values
            grad[j] = (up - down) / (x_up - x_down)
        grads.append(grad)
    return grads


def assert_gradients_close(actual, expected, arrays, wrt, tol, what):
    """Compare analytic and numeric gradients; the analytic one keeps its input's shape and dtype."""
    assert len(actual) == len(expected), f"{what}: {len(actual)} gradients, expected {len(expected)}"
    for i, a, e in zip(wrt, actual, expected):
        a = ops.to_numpy(a)
        x = arrays[i]
        assert a.shape == x.shape, f"{what}: gradient {i} has shape {a.shape}, input {x.shape}"
        assert a.dtype == x.dtype, f"{what}: gradient {i} is {a.dtype}, input {x.dtype}"
        np.testing.assert_allclose(
            a, e, rtol=tol.rtol, atol=tol.atol,
            err_msg=f"{what}: gradient w.r.t. input {i} (analytic vs finite differences)")


def prepare(inputs, tol, wrt=None):
    """Inputs in the check's dtype and the indices of the differentiated ones (default: every float)."""
    arrays = [a.astype(tol.dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
              for a in inputs]
    if wrt is None:
        wrt = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    return arrays, list(wrt)


def check_gradient(fn, inputs, tol=FLOAT64, wrt=None, seed=0, what="gradient", compiled=False):
    """Assert that the shim's gradient of ``sum_k sum(fn(*inputs)_k * R_k)`` matches finite differences.

    The analytic gradient comes from ``value_and_grad``, whose value must equal the objective of
    the plain forward pass. Returns the analytic gradients as NumPy arrays. ``compiled``: the gradient
    and the finite differences' hundreds of forward passes run compiled (``ops.compile``: one trace,
    then fast calls on TensorFlow and JAX), for a deterministic ``fn`` that compiles. (Run eagerly,
    JAX compiles a program per primitive and shape: 70 of them, 9 CPU-seconds, for the gradient of a
    2-layer bidirectional LSTM; every other case checks the eager gradient.)
    """
    arrays, wrt = prepare(inputs, tol, wrt)
    tensors = [to_backend(a, tol.dtype) for a in arrays]
    forward = ops.compile(fn) if compiled else fn
    out = forward(*tensors)
    R, R_np = _weights(out, seed)
    assert R, f"{what}: fn has no float output"

    def objective(params):
        args = list(tensors)
        for i, p in zip(wrt, params):
            args[i] = p
        flat = flatten(fn(*args))
        total = 0.0
        for k, w in R.items():
            total = total + ops.sum(flat[k] * w)
        return total

    params = [tensors[i] for i in wrt]
    gradient = ops.value_and_grad(objective)
    value, grads = (ops.compile(gradient) if compiled else gradient)(params)
    # The same sum in NumPy float64: equal up to the summation order in the outputs' dtype.
    flat = flatten(out)
    roundoff = max(np.finfo(ops.to_numpy(flat[k]).dtype).eps for k in R)
    scale = sum(float(np.sum(np.abs(ops.to_numpy(flat[k]) * R_np[k]))) for k in R)
    assert abs(float(ops.to_numpy(value)) - objective_value(out, R_np)) <= 100 * roundoff * scale, \
        f"{what}: value_and_grad's value differs from the forward pass"
    numeric = numeric_gradient(lambda args: objective_value(forward(*args), R_np), arrays, wrt, tol)
    assert_gradients_close(grads, numeric, arrays, wrt, tol, what)
    return [ops.to_numpy(g) for g in grads]
