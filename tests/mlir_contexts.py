"""JAX's lowering, with one MLIR context per thread for the JAX tests (and their notebook kernel).

JAX lowers every program to an MLIR module in a new context, loading its dialects each time (~3 ms), and the
lowering then runs cold in it. The JAX suite lowers ~4,400 programs outside its notebooks (counted on
2026-11-29), and lowering was a third of the env's time. Here each thread lowers in one context, as a
long-lived program would if JAX kept its context: the same modules, so the same compiled programs (the
persistent cache's keys are the modules' text). Measured on the whole JAX suite, side by side with the old
way: 323 against 370 CPU-s, and a peak of 1.6 GB against 4.1 GB.
"""

import threading

#: What the notebook kernel runs as it starts (``tests/chapters``): the same settings as the test process.
KERNEL_SETUP = "import os; from tests.mlir_contexts import apply; apply(os.environ['D2LRNN_BACKEND'])"


def apply(backend):
    """Lower in one context per thread where ``backend`` is JAX; leave every other framework as it is."""
    if backend == "jax":
        lower_in_one_context_per_thread()


def lower_in_one_context_per_thread():
    """Make JAX's ``make_ir_context`` hand each thread one context; a JAX without that (private) name is
    left as it is."""
    from jax._src.interpreters import mlir

    make_context = getattr(mlir, "make_ir_context", None)
    if make_context is None or getattr(make_context, "shared", False):
        return
    contexts = threading.local()

    def shared_context():
        if not hasattr(contexts, "context"):
            contexts.context = make_context()
        return contexts.context

    shared_context.shared = True
    mlir.make_ir_context = shared_context


def lowering_contexts():
    """``'one per thread'`` where this process's JAX lowers so, ``'one per program'`` where it lowers as JAX
    does, ``None`` where JAX is not loaded."""
    import sys

    mlir = sys.modules.get("jax._src.interpreters.mlir")
    if mlir is None:
        return None
    return "one per thread" if getattr(mlir.make_ir_context, "shared", False) else "one per program"
