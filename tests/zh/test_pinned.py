"""``from d2lrnn.zh import <framework> as d2l``: the package face, on the backend the import line names."""

import importlib
import pathlib
import sys
import warnings

import numpy as np
import pytest

import d2lrnn
from d2lrnn import _pinning
from d2lrnn.zh import _pinned

TENSOR_MODULES = {"numpy": "numpy", "torch": "torch", "tensorflow": "tensorflow", "mxnet": "mxnet",
                  "jax": "jaxlib", "paddle": "paddle"}  # a jax.Array is a jaxlib ArrayImpl


def _forget(monkeypatch):
    """As if no d2lrnn.zh module had been imported in this process (put back as it was afterwards)."""
    monkeypatch.setattr(_pinning, "_pinned", None)
    for name in [m for m in sys.modules if m.startswith("d2lrnn.zh.") and m != "d2lrnn.zh._pinned"]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def fresh(monkeypatch):
    _forget(monkeypatch)


def _import(name):
    return importlib.import_module(f"d2lrnn.zh.{name}")


def _other(backend):
    """A backend whose framework this env does not install (each env has its own framework only)."""
    return "jax" if backend != "jax" else "torch"


def test_the_import_line_chooses_the_backend_and_says_so_once_where_the_variable_differs(backend, fresh,
                                                                                          monkeypatch):
    differing = "numpy" if backend != "numpy" else "torch"
    monkeypatch.setenv("D2LRNN_BACKEND", differing)
    with pytest.warns(_pinned.BackendChoiceWarning) as said:
        d2l = _import(backend)
    assert [str(w.message) for w in said] == [
        f"D2LRNN_BACKEND={differing}, but the import line names {backend}: d2lrnn runs on {backend}"]
    assert d2l.backend_name() == d2lrnn.backend_name() == backend
    # the book's names, computing on the framework's tensors
    X = d2l.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert type(X).__module__.split(".")[0] == TENSOR_MODULES[backend]
    np.testing.assert_array_equal(d2l.to_numpy(d2l.matmul(X, d2l.transpose(X))), [[5, 14], [14, 50]])
    assert d2l.RNNModelScratch is d2lrnn.RNNModelScratch and d2l.plt.__name__ == "matplotlib.pyplot"
    assert set(d2l.__all__) == set(d2lrnn.__all__) and "train_ch8" in dir(d2l)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # imported again: nothing more said
        assert importlib.reload(d2l).backend_name() == backend


def test_no_warning_where_the_variable_agrees_or_is_unset(backend, fresh, monkeypatch):
    for setting in (backend, None):
        if setting is None:
            monkeypatch.delenv("D2LRNN_BACKEND", raising=False)
        else:
            monkeypatch.setenv("D2LRNN_BACKEND", setting)
        _forget(monkeypatch)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _import(backend).backend_name() == backend


def test_a_second_framework_in_one_process_is_refused_in_one_line(backend, fresh):
    _import(backend)
    other = _other(backend)
    with pytest.raises(d2lrnn.BackendError) as refused:
        _import(other)
    assert str(refused.value) == (
        f"d2lrnn.zh.{backend} is in use in this process, so d2lrnn.zh.{other} cannot be: a process runs one "
        f"framework; start a new Python (or notebook kernel) for {other}")
    assert d2lrnn.backend_name() == backend  # nothing changed
    assert f"d2lrnn.zh.{other}" not in sys.modules


def test_a_framework_that_is_not_installed_is_one_line_naming_the_extra(backend, fresh, monkeypatch):
    monkeypatch.delenv("D2LRNN_BACKEND", raising=False)
    other = _other(backend)
    with pytest.raises(d2lrnn.BackendError) as missing:
        _import(other)
    message = str(missing.value)
    assert "\n" not in message and f'pip install "d2lrnn[{other}]"' in message, message
    assert d2lrnn.backend_name() == backend and _pinning._pinned is None  # nothing changed
    assert _import(backend).backend_name() == backend  # and the env's own framework still can be


def test_every_backend_has_its_module():
    names = {p.stem for p in pathlib.Path(_pinned.__file__).parent.glob("*.py")} - {"__init__", "_pinned"}
    assert names == set(d2lrnn.available_backends())


#: What the book's package gives as d2l.float32 on each framework: the framework's own dtype where its tensors
#: have one, NumPy's class on MXNet, JAX (jnp.float32 equals it) and the NumPy face.
BOOK_FLOAT32 = {"torch": "torch.float32", "tensorflow": "<dtype: 'float32'>", "paddle": "paddle.float32",
                "mxnet": "<class 'numpy.float32'>", "jax": "<class 'numpy.float32'>",
                "numpy": "<class 'numpy.float32'>"}


def test_the_faces_dtypes_are_the_frameworks_and_every_maker_takes_them(backend, fresh):
    d2l = _import(backend)
    assert str(d2l.float32) == BOOK_FLOAT32[backend]
    X = d2l.zeros((2, 3), dtype=d2l.int64)
    assert X.dtype == d2l.int64 and d2l.ones((2,), dtype=d2l.int32).dtype == d2l.int32
    assert d2l.arange(1, 4, dtype=d2l.float32).dtype == d2l.float32
    assert d2l.tensor([1, 2], dtype=d2l.float32).dtype == d2l.float32
    assert d2l.astype(d2l.tensor([1.5, 2.5]), d2l.int64).dtype == d2l.int64
    assert d2l.to_numpy(d2l.astype(d2l.tensor([1.5, 2.5]), d2l.int32)).tolist() == [1, 2]
    # and NumPy's names and dtypes, the neutral face's forms, as well
    assert d2l.zeros((2,), dtype="int64").dtype == d2l.int64
    assert d2l.zeros((2,), dtype=np.float32).dtype == d2l.float32
