"""What only the JAX backend does: it keeps XLA's compiled programs on disk between runs, and a compiled
recurrent layer runs its steps as one loop.

The cache is checked in fresh interpreters (JAX reads its cache setting when it loads), where jax is
installed.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import HANG_GUARD_SECONDS, ROOT

pytest.importorskip("jax", reason="the jax backend's own behaviour; jax is installed in the jax env")

# Compile one small program (JAX's thresholds lowered so that it is kept) and report the setting.
SCRIPT = """
import json
import d2lrnn as d2l
import jax
step = d2l.compile(lambda X: d2l.sum(d2l.tanh(d2l.matmul(X, X))))
step(d2l.ones((4, 4)))
print(json.dumps(jax.config.jax_compilation_cache_dir))
"""


def cache_dir_in_fresh_process(tmp_path, **env):
    """The cache folder JAX was given in a new process with ``env`` (and HOME in ``tmp_path``)."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("JAX_COMPILATION_CACHE") and k not in ("D2LRNN_JAX_CACHE", "XDG_CACHE_HOME")}
    full.update(HOME=str(tmp_path / "home"), D2LRNN_BACKEND="jax", PYTHONPATH=str(ROOT),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    full.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=full,
                         timeout=HANG_GUARD_SECONDS)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_compiled_programs_are_kept_in_the_users_cache_folder(tmp_path):
    where = tmp_path / "home" / ".cache" / "d2lrnn" / "jax"
    assert cache_dir_in_fresh_process(tmp_path) == str(where)
    assert any(where.iterdir())  # the program compiled above is on disk


def test_xdg_cache_home_and_d2lrnn_jax_cache_choose_the_folder(tmp_path):
    xdg = tmp_path / "xdg"
    assert cache_dir_in_fresh_process(tmp_path, XDG_CACHE_HOME=str(xdg)) == str(xdg / "d2lrnn" / "jax")
    mine = tmp_path / "mine"
    assert cache_dir_in_fresh_process(tmp_path, D2LRNN_JAX_CACHE=str(mine)) == str(mine)
    assert any(mine.iterdir())


def test_off_and_jaxs_own_setting_are_respected(tmp_path):
    assert cache_dir_in_fresh_process(tmp_path, D2LRNN_JAX_CACHE="off") is None
    assert not (tmp_path / "home" / ".cache").exists()
    theirs = tmp_path / "theirs"
    assert cache_dir_in_fresh_process(tmp_path, JAX_COMPILATION_CACHE_DIR=str(theirs)) == str(theirs)


@pytest.mark.parametrize("cell, reset_after",
                         [("rnn", False), ("gru", False), ("gru", True), ("lstm", False)])
def test_the_compiled_gradient_of_a_scratch_model_does_not_grow_with_the_steps(cell, reset_after,
                                                                               monkeypatch):
    # ops.scan is lax.scan under jit: the program holds the step once, forward and backward, however many
    # steps (a Python loop would put T copies of each into it, which XLA took seconds to compile). The GRUs'
    # backward scans ask to be unrolled, which holds up to UNROLL_MAX_STEPS steps: lowered here below both T.
    import jax

    import d2lrnn as d2l
    from d2lrnn import ops
    from d2lrnn.backends import jax as backend

    monkeypatch.setattr(backend, "UNROLL_MAX_STEPS", 2)

    with d2l.use_backend("jax"):
        net = d2l.make_model("scratch", 5, 4, cell=cell, reset_after=reset_after)

        def loss(params, X, state):
            Y, _ = net(X, state, params)
            return ops.sum(Y * Y)

        grad = jax.jit(ops.value_and_grad(loss))
        # T apart from the batch (2), hidden (4) and vocabulary (5) sizes: a shim function that is a jit
        # function of its own is one private function of the program per distinct shape of its arguments,
        # and a T equal to another size would share one and shorten the text for a reason other than T.
        lines = [len(grad.lower(net.params, ops.zeros((2, T), dtype="int64"), net.begin_state(2)).as_text()
                     .splitlines()) for T in (3, 9)]
    assert lines[0] == lines[1]


def test_a_scan_asked_to_unroll_is_unrolled_up_to_the_limit(monkeypatch):
    # The GRUs' backward scans ran 1.5x faster unrolled in the book's training step; longer loops stay loops.
    import jax

    from d2lrnn.backends import jax as backend

    def unroll_of_scan(T, unroll):
        def run(xs):
            return backend.scan(lambda c, x: (c + x, c), xs[0] * 0.0, xs, reverse=True, unroll=unroll)

        jaxpr = jax.make_jaxpr(run)(jax.numpy.ones((T, 2)))
        return [eqn.params["unroll"] for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]

    assert unroll_of_scan(5, unroll=False) == [backend.SCAN_UNROLL] == [1]
    assert unroll_of_scan(5, unroll=True) == [5]
    monkeypatch.setattr(backend, "UNROLL_MAX_STEPS", 4)
    assert unroll_of_scan(5, unroll=True) == [1]
    assert unroll_of_scan(4, unroll=True) == [4]


def test_a_shim_function_of_several_operations_is_one_program_when_called_eagerly(compiled_programs):
    # Eagerly, each JAX operation compiles a program of its own at each new shape (~20 ms): the cross-entropy
    # alone was eight (reshape, gather, max, subtract, exp, sum, log, ...), 688 of the suite's programs.
    import numpy as np

    import d2lrnn as d2l
    from d2lrnn import ops

    rng = np.random.default_rng(0)
    with d2l.use_backend("jax"):
        logits = ops.tensor(rng.standard_normal((13, 17)))  # shapes no other test uses
        labels = rng.integers(0, 17, 13)
        W, b = ops.tensor(rng.standard_normal((19, 17))), ops.tensor(rng.standard_normal(19))
        W_T = ops.tensor(rng.standard_normal((17, 19)))
        P, G = [ops.tensor(rng.standard_normal((11, 17)))], [ops.tensor(rng.standard_normal((11, 17)))]
        scalars = ops.tensor(np.array([0.1, 1.5, 2.5], np.float32))
        ops.dropout(scalars, 0.5)  # the host's key split, compiled once per process
        compiled_programs.clear()
        calls = {
            "softmax_cross_entropy": lambda: ops.softmax_cross_entropy(logits, labels),
            "linear": lambda: ops.linear(logits, W, b),
            "dense": lambda: ops.dense(logits, W_T, b),
            "softmax": lambda: ops.softmax(logits, axis=0),
            "sum": lambda: ops.sum(logits, axis=(0, 1), keepdims=True),
            "mean": lambda: ops.mean(logits, axis=1),
            "sum_of_squares": lambda: ops.sum_of_squares([logits, W, b]),
            "adam_update": lambda: ops.adam_update(P, G, P, P, scalars, 0.9, 0.999, 1e-8),
            "dropout": lambda: ops.dropout(logits, 0.25),
        }
        for name, call in calls.items():
            before = len(compiled_programs)
            expected = ops.to_numpy(call())
            assert len(compiled_programs) - before == 1, (name, compiled_programs[before:])
            again = ops.to_numpy(call())  # the same shapes: the program is reused
            assert len(compiled_programs) - before == 1, (name, compiled_programs[before:])
            if name != "dropout":  # a new mask each call
                np.testing.assert_array_equal(again, expected)
        masks = [ops.to_numpy(ops.dropout(logits, 0.25)) == 0 for _ in range(2)]
        assert (masks[0] != masks[1]).any()


def test_moving_values_about_compiles_nothing_on_the_cpu(compiled_programs):
    # Reshaping, joining, splitting and indexing concrete arrays copy values on the host, where XLA compiled
    # a program for every new shape (splitting 35 time steps apart: ~0.4 s): the same values, the same dtype,
    # committed to the device as the input was, and no program.
    import jax
    import numpy as np

    import d2lrnn as d2l
    from d2lrnn import ops

    rng = np.random.default_rng(1)
    with d2l.use_backend("jax"):
        x_np = rng.standard_normal((5, 7, 3)).astype(np.float32)
        x = ops.tensor(x_np)
        placed = jax.device_put(x, jax.devices()[0])
        indices = np.array([6, 0, -1, 2])
        compiled_programs.clear()
        cases = [
            (ops.reshape(x, (7, -1)), x_np.reshape(7, -1)),
            (ops.transpose(x, (2, 0, 1)), x_np.transpose(2, 0, 1)),
            (ops.concat([x, placed], axis=1), np.concatenate([x_np, x_np], axis=1)),
            (ops.stack([x, x], axis=-1), np.stack([x_np, x_np], axis=-1)),
            (ops.take(x, indices, axis=1), np.take(x_np, indices, axis=1)),
            (ops.take(x, indices[:2], axis=None), np.take(x_np, indices[:2])),
        ] + [(piece, x_np[:, i]) for i, piece in enumerate(ops.unstack(x, axis=-2))]
        for got, expected in cases:
            assert got.dtype == expected.dtype and not got.weak_type
            np.testing.assert_array_equal(ops.to_numpy(got), expected)
        assert not ops.reshape(x, (-1,)).committed and ops.reshape(placed, (-1,)).committed
        assert ops.concat([x, placed]).committed and not ops.concat([x, x]).committed
        assert all(piece.committed for piece in ops.unstack(placed))
        assert compiled_programs == []
        # out of range, NumPy would raise where JAX fills with NaN: such a take stays JAX's
        filled = ops.to_numpy(ops.take(x, np.array([0, 9]), axis=1))
        np.testing.assert_array_equal(filled[:, 0], x_np[:, 0])
        assert np.isnan(filled[:, 1]).all()
        # traced, they are operations of the compiled program
        jitted = jax.jit(lambda a: ops.stack(ops.unstack(ops.transpose(a)), axis=0))
        np.testing.assert_array_equal(ops.to_numpy(jitted(x)), x_np.T)


def test_host_arrays_reach_the_device_without_compiling_a_program(compiled_programs):
    # jnp.asarray would compile an identity program for each new shape and dtype it moves to the device (385
    # of the 5,362 programs the suite compiled outside the notebooks).
    import numpy as np

    import d2lrnn as d2l
    from d2lrnn import ops

    with d2l.use_backend("jax"):
        host = np.arange(3 * 7 * 11, dtype=np.float64).reshape(3, 7, 11)  # a shape no other test uses
        made = [ops.tensor(host), ops.from_numpy(host), ops.tensor(host, dtype="float64"),
                ops.astype(host, "int32"), ops.tensor(host.tolist())]
        assert [str(m.dtype) for m in made] == ["float32", "float32", "float64", "int32", "float32"]
        np.testing.assert_array_equal(ops.to_numpy(made[3]), host.astype(np.int32))
    assert compiled_programs == []
