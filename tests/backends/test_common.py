"""Process-wide settings every backend shares (d2lrnn/backends/_common.py)."""

import json
import os
import pathlib
import sys
import textwrap

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from tests.conftest import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]


def churn():
    """What a training step does to the heap: several arrays of a few MB, all freed at its end (80 arrays of
    1,024 pages each)."""
    for _ in range(10):
        arrays = [np.ones(1 << 20, np.float32) for _ in range(8)]  # 8 x 4 MB
        del arrays


def churn_faults():
    """The page faults of one churn after another (the first grows the heap)."""
    import resource  # Unix only

    churn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


FAULTS = textwrap.dedent("""
    import d2lrnn as d2l
    from tests.backends.test_common import churn_faults
    d2l.ops.zeros(1)  # loads the backend
    print(churn_faults())
""")


def _fresh_process_faults(**env):
    """churn_faults() in a fresh process of this interpreter, with ``env`` set (and this checkout's tests
    importable)."""
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    out = run_python(FAULTS, env)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")
def test_freed_memory_is_reused_without_page_faults():
    # With malloc's defaults the freed heap top is returned to the OS after each step, and the next step
    # faults every page in again; tuned, it stays. Both in a fresh process on NumPy's backend, the one that
    # imports in a moment; then in this process, with the active backend loaded as in a user's training run
    # (a fresh process importing TensorFlow again for it cost ~5 s).
    default = _fresh_process_faults(D2LRNN_MALLOC="default", D2LRNN_BACKEND="numpy")
    tuned = _fresh_process_faults(D2LRNN_MALLOC="", D2LRNN_BACKEND="numpy")
    d2l.ops.zeros(1)  # the active backend loaded
    assert default > 10 * 1000
    assert tuned < 100
    assert churn_faults() < 100


@pytest.mark.parametrize("seed", [-1, 2.5, "0", None, 2**32])
def test_manual_seed_refuses_what_numpy_cannot_seed_in_one_line(seed):
    with pytest.raises(d2l.ArgumentError, match="seed must be"):
        d2l.manual_seed(seed)


def test_the_shared_generator_state_round_trips_as_plain_data():
    d2l.manual_seed(5)
    state = json.loads(json.dumps(d2lrnn.backends.generator_state()))
    first = d2l.to_numpy(d2l.normal(0, 1, (4,)))
    d2lrnn.backends.set_generator_state(state)
    np.testing.assert_array_equal(d2l.to_numpy(d2l.normal(0, 1, (4,))), first)


class _FakeTorchDtype:  # what str() of torch.int64 and paddle.float32 look like, with no NumPy conversion
    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


class _FakeTfDtype:  # TensorFlow's DType: it says its NumPy type
    as_numpy_dtype = np.int32


@pytest.mark.once  # the conversion is backend-free
def test_numpy_dtype_reads_numpy_names_and_frameworks_dtypes():
    from d2lrnn.backends._common import numpy_dtype

    assert numpy_dtype(None) is None
    assert numpy_dtype("float32") == np.float32 and numpy_dtype(np.int64) == np.int64
    assert numpy_dtype(_FakeTorchDtype("torch.int64")) == np.int64
    assert numpy_dtype(_FakeTorchDtype("paddle.float32")) == np.float32
    assert numpy_dtype(_FakeTfDtype()) == np.int32
    with pytest.raises(d2l.ArgumentError, match=r"dtype .*not one d2lrnn knows: give a NumPy dtype"):
        numpy_dtype(_FakeTorchDtype("torch.fancy8"))


@pytest.mark.once  # NumPy arrays only (the mxnet env's older NumPy: tests/backends/test_mxnet.py)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adams_update_in_place_gives_the_formulas_bits(rng, dtype, weight_decay):
    from d2lrnn.backends import _common

    shapes = [(7, 5), (300,), (64, 33)]
    P, G, M = ([rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(3))
    V = [np.abs(rng.standard_normal(s)).astype(dtype) for s in shapes]
    G_before = [g.copy() for g in G]
    as_tensor = np.array([0.01, 1 / (1 - 0.9 ** 3), 1 / (1 - 0.999 ** 3)], np.float32)
    for scalars in (as_tensor, [float(v) for v in as_tensor]):
        formula = _common.adam_update(P, G, M, V, scalars, 0.9, 0.999, 1e-8, weight_decay, np.sqrt)
        copies = [[a.copy() for a in arrays] for arrays in (P, M, V)]
        in_place = _common.adam_update_in_place(copies[0], G, copies[1], copies[2], scalars, 0.9, 0.999, 1e-8,
                                                weight_decay)
        for got, expected in zip(in_place, formula):
            for a, b in zip(got, expected):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
    for g, before in zip(G, G_before):  # the gradients are read, not written
        np.testing.assert_array_equal(g, before)


def test_the_cpus_vendor_and_instruction_sets_come_from_its_first_entry(monkeypatch, tmp_path):
    from d2lrnn.backends import _common

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 avx512f\n\n"
                       "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n")
    monkeypatch.setattr(_common, "CPUINFO", str(cpuinfo))
    assert _common.cpu_vendor() == "AuthenticAMD"
    assert _common.cpu_flags() == {"fpu", "avx2", "avx512f"}
    monkeypatch.setattr(_common, "CPUINFO", str(tmp_path / "missing"))  # not Linux: nothing known
    assert _common.cpu_vendor() == "" and _common.cpu_flags() == frozenset()
