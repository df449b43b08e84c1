"""The compilers' settings for the tests (and their notebook kernel): the same programs, built for less.

The tests' programs are tiny and most run a few times, so building them costs far more than running them.

- **JAX lowers in one MLIR context per thread.** JAX lowers every program to an MLIR module in a new context,
  loading its dialects each time (~3 ms), and the lowering then runs cold in it. The JAX suite lowers ~4,400
  programs outside its notebooks (counted on 2026-11-29), and lowering was a third of the env's time. Here
  each thread lowers in one context, as a long-lived program would if JAX kept its context: the same modules,
  so the same compiled programs (the persistent cache's keys are the modules' text). Measured on the whole JAX
  suite, side by side with the old way: 323 against 370 CPU-s, and a peak of 1.6 GB against 4.1 GB.
- **TensorFlow runs its traced graphs without grappler** (its graph optimizer: constant folding, arithmetic
  simplification, operator fusion), which rewrites each graph before its first run. The same operations run,
  unfused; the results differ in the last bits (a seq2seq's loss after 10 epochs by 6e-7 relative), well
  inside the tolerances of the tests, which compare runs of one setting with each other or with the NumPy
  reference. The benchmarks (``bench/``) keep TensorFlow's default, the setting users train with.
- **TensorFlow records no creation stack for the operations it traces**: it keeps the Python stack of the
  moment with each operation it adds to a graph (for its error messages), ~65 us an operation under pytest's
  deep stacks, 0.5 of the 5-6 CPU-s that 2 epochs of the book's seq2seq took. A graph error still fails its
  test; its message no longer says where the operation was made.

The two together, measured on the whole TensorFlow suite side by side with neither (2026-11-30, Intel Xeon):
340 against 416 CPU-s. JAX's compiler flags are environment variables, set in ``tests/conftest.py`` before JAX
loads.
"""

import sys
import threading

#: What the notebook kernel runs as it starts (``tests/chapters``): the same settings as the test process.
KERNEL_SETUP = "import os; from tests.compile_settings import apply; apply(os.environ['D2LRNN_BACKEND'])"


def apply(backend):
    """The settings above for ``backend``'s framework; other frameworks are left as they are."""
    if backend == "jax":
        lower_in_one_context_per_thread()
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
        record_no_creation_stacks()


def in_effect():
    """Which of the settings above this process runs with: a short description, or None."""
    lowering = lowering_contexts()
    if lowering is not None:
        return f"JAX lowering: {lowering}"
    if "tensorflow" in sys.modules:
        options = sys.modules["tensorflow"].config.optimizer.get_experimental_options()
        stacks = _replaced(sys.modules["tensorflow.python.util.tf_stack"].extract_stack)
        return (f"TensorFlow's grappler: {'off' if options.get('disable_meta_optimizer') else 'on'}, "
                f"creation stacks: {'none' if stacks else 'recorded'}")
    return None


def _replace(module, name, replacement_for):
    """Put ``replacement_for(original)`` in place of ``module.name``, once however often this runs; a module
    without that (private) name is left as it is."""
    original = getattr(module, name, None)
    if original is None or _replaced(original):
        return
    replacement = replacement_for(original)
    replacement.test_setting = True
    setattr(module, name, replacement)


def _replaced(function):
    """Whether ``function`` is one of the replacements above."""
    return getattr(function, "test_setting", False)


def record_no_creation_stacks():
    """Make TensorFlow give each operation it adds to a graph an empty creation stack, not the Python stack
    of the moment."""
    from tensorflow.python.util import tf_stack

    def no_stacks(extract_stack):
        empty = extract_stack(stacklevel=1_000_000)  # more frames skipped than any stack has
        return lambda stacklevel=1: empty

    _replace(tf_stack, "extract_stack", no_stacks)


def lower_in_one_context_per_thread():
    """Make JAX's ``make_ir_context`` hand each thread one context."""
    from jax._src.interpreters import mlir

    def one_per_thread(make_context):
        contexts = threading.local()

        def shared_context():
            if not hasattr(contexts, "context"):
                contexts.context = make_context()
            return contexts.context

        return shared_context

    _replace(mlir, "make_ir_context", one_per_thread)


def lowering_contexts():
    """``'one per thread'`` where this process's JAX lowers so, ``'one per program'`` where it lowers as JAX
    does, ``None`` where JAX is not loaded."""
    mlir = sys.modules.get("jax._src.interpreters.mlir")
    if mlir is None:
        return None
    return "one per thread" if _replaced(mlir.make_ir_context) else "one per program"
