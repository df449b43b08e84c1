"""Shared fixtures: the active backend, a seeded NumPy generator, the project root."""

import atexit
import gc
import itertools
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest

if os.environ.get("D2LRNN_BACKEND") == "jax":
    # Set before JAX loads, and inherited by the notebook kernels and command lines the tests start.
    # The tests' programs are tiny and most run once: compiling them costs far more than running them.
    # XLA's LLVM optimization passes were a third of the JAX env's time; its newer fusion emitters (MLIR)
    # a quarter of what was left (an eager operation compiled in ~30 ms with them, ~20 ms without). The
    # same operations and the same checks, compiled by the older emitters without the LLVM passes. And in one
    # piece: XLA splits a program's code generation into parts for a thread pool, which on the one core an env
    # has here only adds work (4-8% of the CPU time of a sample of the JAX tests, in three runs side by side).
    os.environ.setdefault("XLA_FLAGS", " ".join(["--xla_backend_optimization_level=0",
                                                 "--xla_cpu_use_fusion_emitters=false",
                                                 "--xla_cpu_parallel_codegen_split_count=1"]))
    # The suite also builds the same programs many times: new jitted steps of the same model in this
    # process, and again in every notebook kernel and command line it starts. One compilation cache for
    # the session compiles each program once; a fresh directory, so nothing carries over between runs.
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        _jax_cache = tempfile.mkdtemp(prefix="d2lrnn-test-jax-cache-")
        atexit.register(shutil.rmtree, _jax_cache, True)
        os.environ.update(JAX_COMPILATION_CACHE_DIR=_jax_cache,
                          JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                          JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

import d2lrnn as d2l  # noqa: E402
from tests import compile_settings  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


compile_settings.apply(d2l.backend_name())


def token_dtype():
    """The dtype of token batches on the active backend: int64, int32 on TensorFlow (as the book's)."""
    return np.int32 if d2l.backend_name() == "tensorflow" else np.int64


#: A hang guard, not a speed limit, for the child processes and notebook cells the tests start: none
#: takes more than ~30 s on an idle 2-core machine (a kernel importing TensorFlow, a command line
#: training), so this only ever stops one that hangs, even on a machine many times busier.
HANG_GUARD_SECONDS = 900


#: The backend whose env runs the tests marked ``once`` (see :func:`pytest_collection_modifyitems`).
ONCE_BACKEND = "numpy"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "once: what the test checks is code above the backend (argument parsing, run folders, "
        "input fuzzing, the package's import layers), the same on every backend: it runs in the numpy env "
        "only")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``once`` run in the numpy env and are deselected in the others.

    tox runs the suite once per backend. A test whose subject is code above the backend (the command
    line's argument, folder and resume-settings handling, run-folder locks, the fuzzing of its inputs)
    would check the same code six times, even where it trains a tiny model on the way; such a test is
    marked ``once``. What that code hands to a backend (training, saving, resuming and generating through
    the command line, divergence, the fuzzer's extreme values) has tests of its own that every env runs.
    """
    if d2l.backend_name() == ONCE_BACKEND:
        return
    once = [item for item in items if item.get_closest_marker("once")]
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = [item for item in items if item not in once]


#: Whether the tests freeze what exists out of the garbage collector's sight (not with
#: ``D2LRNN_TEST_GC_FREEZE=0``): here after collection, and in the notebooks' kernel after each reset
#: (tests/chapters/test_notebooks.py).
GC_FREEZE = os.environ.get("D2LRNN_TEST_GC_FREEZE", "1") == "1"


def pytest_collection_finish(session):
    """Freeze what the imports made (the framework's modules, d2lrnn's, the test modules') out of the
    garbage collector's sight. Python's full collections walk every tracked object, ~0.9 million of them
    with TensorFlow loaded, and a suite that traces and compiles thousands of programs runs one every few
    seconds; objects made before the tests start are never garbage, so walking them is only work. A
    collection first: a cycle already unreachable is freed, not kept."""
    if GC_FREEZE:
        gc.collect()
        gc.freeze()


@pytest.fixture
def backend():
    """The backend this test session runs on (from D2LRNN_BACKEND)."""
    return d2l.backend_name()


@pytest.fixture
def rng():
    """A seeded NumPy generator: test data is made in NumPy and converted per backend."""
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded():
    d2l.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _thread_settings_kept(monkeypatch):
    """Put back what a test's ``set_num_threads`` changed: torch's thread count, and the variables that
    size the thread pools of the processes it starts. tox gives each env one thread; a test that left
    torch on two would slow every later test of the env several times, with five envs on two cores."""
    for name in ("OMP_NUM_THREADS", "XLA_FLAGS"):  # monkeypatch restores what it touched
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    yield
    if threads is not None:
        torch.set_num_threads(threads)


@pytest.fixture
def no_shared_programs():
    """The backend's shared compiled programs (``ops.compile(..., key=)``) dropped before the test: a test
    that counts the programs a function makes then sees none an earlier test's models already made."""
    shared = getattr(d2l.get_backend(), "_shared_programs", None)
    if shared is not None:
        shared.clear()


@pytest.fixture
def compiled_programs():
    """The names of the XLA programs compiled while the test runs, in order (JAX tests)."""
    import jax.monitoring

    compiled = []

    def listen(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listen)
    yield compiled
    jax.monitoring.unregister_event_duration_listener(listen)


def run_python(code, env=None):
    """Run ``code`` in a fresh interpreter (for import-time behaviour); return the result."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=HANG_GUARD_SECONDS)


def ticking_clock(seconds_per_call):
    """A clock that moves ``seconds_per_call`` every time it is read, from 0: code timed with it sees the
    same durations on an idle or a busy machine (a time budget becomes a count of readings)."""
    ticks = itertools.count()
    return lambda: next(ticks) * seconds_per_call


def as_time_module(clock):
    """A stand-in for the ``time`` module of the code under test, whose ``perf_counter`` is ``clock``."""
    return types.SimpleNamespace(perf_counter=clock, time=clock, monotonic=clock)
