"""``from d2lrnn.en import <framework> as d2l``: the 1.0 edition's names, the backend from the import line."""

import importlib
import pathlib
import sys

import pytest

import d2lrnn
from d2lrnn.book import en as book_en

from .conftest import EN_BACKENDS, EN_RUNS, forget


def test_the_face_has_one_module_per_framework_of_the_1_0_edition():
    package = pathlib.Path(d2lrnn.__file__).parent / "en"
    assert {p.stem for p in package.glob("*.py")} - {"__init__", "_pinned"} == set(EN_BACKENDS)


def test_a_backend_the_1_0_edition_has_no_cells_for_has_no_module(backend, monkeypatch):
    forget(monkeypatch)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("d2lrnn.en.numpy")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("d2lrnn.en.paddle")
    if backend not in EN_RUNS:  # the classes need a framework's modules: one line says so
        with pytest.raises(d2lrnn.ArgumentError) as refused:
            book_en.names()
        assert "\n" not in str(refused.value) and f"the {backend} backend has no" in str(refused.value)


def _import_own(backend, monkeypatch):
    """The face of the env's framework (the zh face where the 1.0 edition's does not run)."""
    edition = "en" if backend in EN_RUNS else "zh"
    return edition, importlib.import_module(f"d2lrnn.{edition}.{backend}")


def test_one_framework_per_process_across_both_editions(backend, monkeypatch):
    forget(monkeypatch)
    monkeypatch.delenv("D2LRNN_BACKEND", raising=False)
    edition, _ = _import_own(backend, monkeypatch)
    other = "torch" if backend != "torch" else "mxnet"  # refused before its framework would load
    for face in ("en", "zh"):
        with pytest.raises(d2lrnn.BackendError) as refused:
            importlib.import_module(f"d2lrnn.{face}.{other}")
        assert str(refused.value) == (
            f"d2lrnn.{edition}.{backend} is in use in this process, so d2lrnn.{face}.{other} cannot be: a "
            f"process runs one framework; start a new Python (or notebook kernel) for {other}")
        assert f"d2lrnn.{face}.{other}" not in sys.modules
    assert d2lrnn.backend_name() == backend
