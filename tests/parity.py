"""Parity harness: run one function on the active backend and on the NumPy reference.

Inputs are made once in NumPy (from a seeded ``Generator``) and converted for each
backend, so both runs see identical numbers. ``assert_parity`` compares the outputs
and, when asked, the gradients of a fixed random projection of the outputs with
respect to the float inputs.
"""

import numpy as np

import d2lrnn as d2l
from d2lrnn import ops

# float32 has ~7 significant digits; 1e-5 relative leaves room for a different
# summation order in each framework's kernels. The absolute floor only matters for
# entries that are (nearly) zero, where a relative test is meaningless.
RTOL = 1e-5
ATOL = 1e-6


def to_numpy_tree(tree):
    """Convert nested tuples/lists of tensors into the same structure of NumPy arrays."""
    if isinstance(tree, (tuple, list)):
        return type(tree)(to_numpy_tree(t) for t in tree)
    if isinstance(tree, (int, float, bool, str, np.ndarray, np.generic)) or tree is None:
        return tree
    return ops.to_numpy(tree)


def run(backend, fn, np_inputs, grad=False, seed=0):
    """Run ``fn(*tensors)`` on ``backend``; return NumPy outputs (and gradients if ``grad``).

    Gradients are those of ``sum(out * R)`` with a fixed random ``R`` per output, taken
    with respect to every float input, so each output element gets a different weight.
    """
    with d2l.use_backend(backend):
        tensors = [ops.from_numpy(a) if isinstance(a, np.ndarray) else a for a in np_inputs]
        out = fn(*tensors)
        if not grad:
            return to_numpy_tree(out), None
        float_idx = [i for i, a in enumerate(np_inputs)
                     if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        ref_out = to_numpy_tree(out)
        outs = ref_out if isinstance(ref_out, (tuple, list)) else [ref_out]
        rng = np.random.default_rng(seed + 1)
        weights = [ops.from_numpy(rng.standard_normal(np.shape(o)).astype(np.float32))
                   for o in outs]

        def loss(params):
            args = list(tensors)
            for i, p in zip(float_idx, params):
                args[i] = p
            res = fn(*args)
            res = res if isinstance(res, (tuple, list)) else [res]
            total = 0.0
            for r, w in zip(res, weights):
                total = total + ops.sum(r * w)
            return total

        _, grads = ops.value_and_grad(loss)([tensors[i] for i in float_idx])
        return ref_out, [ops.to_numpy(g) for g in grads]


def assert_close(actual, expected, rtol=RTOL, atol=ATOL, what="value"):
    """Compare nested outputs elementwise, with a message that says which output differs."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, f"{what}[{i}]")
        return
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=what)


def assert_parity(fn, np_inputs, grad=False, rtol=RTOL, atol=ATOL):
    """``fn`` gives the same values (and gradients) on the active backend as on NumPy."""
    out, grads = run(d2l.backend_name(), fn, np_inputs, grad)
    ref_out, ref_grads = run("numpy", fn, np_inputs, grad)
    assert_close(out, ref_out, rtol, atol, "value")
    if grad:
        assert_close(grads, ref_grads, rtol, atol, "gradient")
    return out, grads
