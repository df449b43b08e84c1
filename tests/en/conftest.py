"""The English 1.0 face's fixtures: ``d2l`` is ``from d2lrnn.en import <backend> as d2l`` (env's backend).

The 1.0 edition has PyTorch, MXNet, TensorFlow and JAX cells; d2lrnn.en runs all four. The JAX cells train
Flax modules functionally: ``test_flax.py`` (collected in the jax env) tests that form, and the tests of the
in-place forms (``in_place``) are skipped there. In the numpy and paddle envs (the book has no such cells),
only ``test_face.py`` applies; the tests of the classes are not collected.
"""

import importlib
import sys

import pytest

import d2lrnn
from d2lrnn import _pinning

#: The frameworks of the 1.0 edition: the modules of d2lrnn.en.
EN_BACKENDS = ("torch", "mxnet", "tensorflow", "jax")
#: Those whose module runs the 1.0 classes.
EN_RUNS = ("torch", "mxnet", "tensorflow", "jax")
#: Those whose modules train in place (JAX's Flax modules are functions of their parameters: test_flax.py).
IN_PLACE = ("torch", "mxnet", "tensorflow")

collect_ignore = [] if d2lrnn.backend_name() in EN_RUNS else ["test_classes.py", "test_training.py"]
if d2lrnn.backend_name() != "jax":
    collect_ignore.append("test_flax.py")

#: A test of the classes that train in place (their parameters are the module's own attributes).
in_place = pytest.mark.skipif(d2lrnn.backend_name() not in IN_PLACE,
                              reason="in-place parameters; the functional (JAX) forms are in test_flax.py")


def forget(monkeypatch):
    """As if no face module with the framework in the import line had been imported in this process (put
    back as it was afterwards)."""
    monkeypatch.setattr(_pinning, "_pinned", None)
    for name in [m for m in sys.modules if m.startswith(("d2lrnn.en.", "d2lrnn.zh."))
                 and not m.endswith("._pinned")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def d2l(backend, monkeypatch):
    """The 1.0 face on the env's backend, seeded; on MXNet with ``npx.set_np()`` on, as the book's cells turn
    it on (and the legacy arrays again afterwards, with the NumPy shapes d2lrnn's backend keeps on)."""
    forget(monkeypatch)
    monkeypatch.delenv("D2LRNN_BACKEND", raising=False)
    face = importlib.import_module(f"d2lrnn.en.{backend}")
    face.manual_seed(0)
    if backend != "mxnet":
        yield face
        return
    from mxnet import npx

    npx.set_np()
    try:
        yield face
    finally:
        npx.set_np(shape=True, array=False)
