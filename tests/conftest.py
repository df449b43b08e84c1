"""Shared fixtures: the active backend, a seeded NumPy generator, the project root."""

import atexit
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

if os.environ.get("D2LRNN_BACKEND") == "jax" and "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    # XLA compiling is most of a JAX test's time, and the suite builds the same programs many times:
    # new jitted steps of the same model in this process, and again in every notebook kernel and command
    # line it starts. One compilation cache for the session (set before JAX loads, and inherited by those
    # processes) compiles each program once; a fresh directory, so nothing carries over between runs.
    _jax_cache = tempfile.mkdtemp(prefix="d2lrnn-test-jax-cache-")
    atexit.register(shutil.rmtree, _jax_cache, True)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=_jax_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

import d2lrnn as d2l  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def run_python(code, env=None):
    """Run ``code`` in a fresh interpreter (for import-time behaviour); return the result."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300)
