"""What training counts and times: running sums, elapsed seconds, perplexity.

Every wall-clock reading of the training loop goes through :func:`clock` (``time.perf_counter``), so a
test can replace this module's ``time`` with a clock of its own and get the same durations on an idle
or a busy machine.
"""

import math
import time

import numpy as np

from .. import ops


def clock():
    """Seconds from an arbitrary start (``time.perf_counter``): the training loop's one clock."""
    return time.perf_counter()


class Timer:
    """Record running times (the book's ``Timer``): ``stop()`` returns the seconds since ``start()``."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        self.tik = clock()

    def stop(self):
        self.times.append(clock() - self.tik)
        return self.times[-1]

    def avg(self):
        return sum(self.times) / len(self.times)

    def sum(self):
        return sum(self.times)


def as_float(x):
    """A Python float from a number or a one-element tensor of any backend."""
    return float(x) if isinstance(x, (int, float, np.number)) else float(ops.to_numpy(x))


class Accumulator:
    """Sums over ``n`` variables (the book's ``Accumulator``)."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        """Add one number (or one-element tensor) to each sum."""
        self.data = [a + as_float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def perplexity(mean_loss):
    """exp(mean cross-entropy); inf rather than an OverflowError for a huge (finite) loss."""
    try:
        return math.exp(mean_loss)
    except OverflowError:
        return math.inf


def format_perplexity(ppl, decimals=2):
    """``5.21``; a huge value compactly (``3.1e+84`` rather than 85 digits); ``inf`` and ``nan`` as is."""
    if not math.isfinite(ppl) or abs(ppl) >= 1e6:
        return f"{ppl:.3g}"
    return f"{ppl:.{decimals}f}"
