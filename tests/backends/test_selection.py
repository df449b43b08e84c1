"""Choosing a backend, lazy framework imports, and the one-line errors of issue 2 point 6."""

import pytest

import d2lrnn as d2l
from d2lrnn.backends import available_backends
from tests.conftest import run_python

FRAMEWORKS = ("torch", "tensorflow", "mxnet", "jax", "paddle")


def test_available_backends_are_the_six_modules():
    assert available_backends() == ["jax", "mxnet", "numpy", "paddle", "tensorflow", "torch"]


def test_use_backend_switches_and_restores(backend):
    with d2l.use_backend("numpy"):
        assert d2l.backend_name() == "numpy"
        assert type(d2l.ones(2)).__module__ == "numpy"
    assert d2l.backend_name() == backend


def test_set_backend_returns_name_and_is_case_insensitive(backend):
    try:
        assert d2l.set_backend(" NumPy ") == "numpy"
        assert d2l.backend_name() == "numpy"
    finally:
        d2l.set_backend(backend)


def test_numpy_backend_imports_no_other_framework():
    r = run_python(
        "import sys, d2lrnn as d2l; d2l.matmul(d2l.ones((2, 2)), d2l.ones((2, 2)));"
        f"print([m for m in {FRAMEWORKS!r} if m in sys.modules])",
        env={"D2LRNN_BACKEND": "numpy"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_import_does_not_load_a_framework_until_first_use(backend):
    r = run_python(
        "import sys, d2lrnn as d2l;"
        f"print(any(m in sys.modules for m in {FRAMEWORKS!r}), d2l.backend_name())",
        env={"D2LRNN_BACKEND": backend},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", backend]


def _one_line_error(r):
    """The process failed with a d2lrnn BackendError whose message is a single line."""
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("d2lrnn.errors.BackendError: "), r.stderr
    assert "During handling of the above exception" not in r.stderr
    return last.split(": ", 1)[1]


def test_unknown_backend_from_environment_lists_valid_names():
    r = run_python("import d2lrnn as d2l; d2l.ones(2)", env={"D2LRNN_BACKEND": "jax2"})
    msg = _one_line_error(r)
    assert "unknown backend 'jax2'" in msg
    assert "jax, mxnet, numpy, paddle, tensorflow, torch" in msg


def test_unknown_backend_from_set_backend():
    with pytest.raises(d2l.BackendError, match=r"unknown backend 'pytorch': choose one of jax, mxnet, numpy"):
        d2l.set_backend("pytorch")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_missing_framework_names_the_pip_extra(framework):
    # sys.modules[name] = None makes "import name" fail as if the package were not installed;
    # numpy's version is faked below 1.24 so the mxnet case reaches its import.
    r = run_python(
        f"import sys, numpy; numpy.__version__ = '1.23.5'; sys.modules[{framework!r}] = None\n"
        f"import d2lrnn as d2l; d2l.set_backend({framework!r})",
        env={"D2LRNN_BACKEND": "numpy"},
    )
    msg = _one_line_error(r)
    assert f"backend {framework!r} needs the package {framework!r}" in msg
    assert f'pip install "d2lrnn[{framework}]"' in msg


def test_mxnet_with_new_numpy_says_so():
    r = run_python(
        "import sys, numpy; numpy.__version__ = '1.26.4'\n"
        "import d2lrnn as d2l; d2l.set_backend('mxnet')",
        env={"D2LRNN_BACKEND": "numpy"},
    )
    msg = _one_line_error(r)
    assert "needs numpy<1.24" in msg and "numpy 1.26.4 is installed" in msg
    assert 'pip install "numpy<1.24"' in msg
