"""Argument checks for the public functions: one-line :class:`ArgumentError` instead of a silent
misbehaviour or a framework's traceback from deep inside.

Each check returns the value (converted where that is harmless, e.g. a NumPy integer to ``int``)
so a caller can write ``lr = checks.positive_number("lr", lr)``.
"""

import math
import numbers

import numpy as np

from .errors import ArgumentError


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(name, value, minimum=None, hint=""):
    """``value`` as an ``int``, at least ``minimum``."""
    if not _is_int(value):
        raise ArgumentError(f"{name} must be a whole number, got {value!r}{hint}")
    if minimum is not None and value < minimum:
        raise ArgumentError(f"{name} must be at least {minimum}, got {value}{hint}")
    return int(value)


def flag(name, value, hint=""):
    """``value`` as a ``bool``: True or False (NumPy's too), not a number or a string that looks like one."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name} must be True or False, got {value!r}{hint}")
    return bool(value)


def positive_int(name, value, hint=""):
    """An integer >= 1."""
    return integer(name, value, 1, hint)


def number(name, value, minimum=None, strict=False, hint=""):
    """A finite real number, above ``minimum`` (``strict``) or at least ``minimum``."""
    if not _is_number(value):
        raise ArgumentError(f"{name} must be a number, got {value!r}{hint}")
    value = float(value)
    if not math.isfinite(value):
        raise ArgumentError(f"{name} must be a finite number, got {value}{hint}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        bound = f"above {minimum:g}" if strict else f"at least {minimum:g}"
        raise ArgumentError(f"{name} must be {bound}, got {value:g}{hint}")
    return value


def below_one(name, value, noun, meaning, example):
    """A number in [0, 1) (a dropout probability, a smoothing weight), or one ArgumentError line that names
    the ``noun``, its ``meaning``, an ``example`` and the command line's flag."""
    number(name, value, hint=f" (the {meaning}, e.g. {example})")
    if not 0 <= value < 1:
        flag = "--" + name.replace("_", "-")
        raise ArgumentError(f"{name} is {value!r}: use a {noun} in [0, 1), e.g. {example} ({flag})")
    return float(value)


def positive_number(name, value, hint=""):
    """A finite number > 0."""
    return number(name, value, 0, strict=True, hint=hint)


#: The largest seed: every framework's own generator takes 32-bit seeds (NumPy takes any size).
MAX_SEED = 2**32 - 1


def seed(value):
    """A random seed: a whole number from 0 to :data:`MAX_SEED`."""
    value = integer("seed", value, 0, " (use e.g. 0)")
    if value > MAX_SEED:
        raise ArgumentError(f"seed must be at most {MAX_SEED} (32 bits, what every framework takes), "
                            f"got {value}")
    return value


# Limits on sizes and counts, from memory and time: the command line refuses a value above them before any
# work (its --help states them), and so does a checkpoint's reader for the model its settings describe, so
# that no number in a file or on the command line can make d2lrnn allocate or loop without end. Within them
# a model must still fit in the machine's memory, which is checked from an estimate before training.

#: Tokens of a vocabulary (every assigned Unicode character is about 150,000).
MAX_VOCAB = 1 << 20
#: Hidden units per layer, and the size of an embedding (an LSTM layer of 8,192 units is a gigabyte).
MAX_HIDDEN = 8192
#: Recurrent layers stacked.
MAX_LAYERS = 64
#: Time steps per sequence, and tokens per sentence of a translation model.
MAX_NUM_STEPS = 10_000
#: Sequences or sentence pairs per minibatch.
MAX_BATCH = 1 << 16
#: Epochs of a run.
MAX_EPOCHS = 100_000
#: Characters ``d2lrnn generate`` produces (one step of the network each: about a minute on a CPU).
MAX_CHARS = 100_000
#: Characters of a prefix or of a sentence to translate.
MAX_PROMPT = 10_000
#: Beams of beam search (each a row of the decoder per sentence).
MAX_BEAM = 100
#: The length-normalisation exponent of beam search (the book's is 0.75).
MAX_ALPHA = 10.0


def at_most(name, value, limit, hint=""):
    """``value`` if it is at most ``limit``, else one :class:`ArgumentError` line that states the limit."""
    if value > limit:
        raise ArgumentError(f"{name} is {value}, above the limit of {limit:,}{hint}")
    return value
