"""Shared fixtures: the active backend, a seeded NumPy generator, the project root."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import d2lrnn as d2l

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
