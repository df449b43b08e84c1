"""Do the printed outputs of one code cell agree across backends, up to printing precision?

Each backend prints its tensors its own way (``array(...)``, ``tensor(...)``, ``<tf.Tensor ...>``,
``<NDArray ...>``, ``Array(...)``, ``Tensor(shape=..., place=...)``) and its own timings. The
comparison therefore reads each line as a sequence of words and numbers after removing the
frameworks' wrappers, the timings, the device (``cpu``, ``/CPU:0``, ``cpu(0)``, ``Place(cpu)``) and any
framework's module name (``numpy``, ``tensorflow.python.framework.ops``); two printed numbers agree when
they differ by at most one unit in the last place of the less precise one (``0.12345678`` and
``0.1235`` agree, ``13.70`` and ``13.73`` do not; ``2.4e-07`` and ``0.0e+00`` do not either).
"""

import math
import re

BACKENDS = ("numpy", "torch", "tensorflow", "mxnet", "jax", "paddle")

# What a framework prints around the numbers of a tensor, removed before comparing.
_WRAPPERS = re.compile(
    r"<tf\.(Tensor|Variable)[^=]*?(shape=\([^)]*\),\s*)?dtype=[\w.]+,\s*numpy=|<NDArray[^>]*>|@cpu\(\d+\)"
    r"|shape=\([^)]*\)|shape=\[[^\]]*\]|dtype=[\w.]+|place=Place\([^)]*\)|stop_gradient=\w+"
    r"|grad_fn=<\w+>|requires_grad=\w+|device=\S+?[,)]|torch\.Size|\b(array|Array|tensor|Tensor)\b")
# Timings: seconds, tokens or examples per second; they differ on every run.
_TIMINGS = re.compile(
    r"(tok/s|tokens/s(ec)?|examples/s(ec)?)\s*[\d,]+(\.\d+)?"
    r"|[\d,]*\d(\.\d+)?\s*(tokens/s(ec)?|examples/s(ec)?|tok/s|sec\b|s\b|ms\b|min\b)")
# Where it ran and which module a type comes from: each framework names them its own way.
_DEVICES = re.compile(r"/?\b(CPU|GPU|cpu|gpu)(:\d+|\(\d+\))?|Place\((cpu|gpu:\d+)\)|CpuDevice\(id=\d+\)")
_MODULES = re.compile(r"\b(numpy|torch|tensorflow|tf|mxnet|mx|jax|jaxlib|flax|paddle)(\.[\w]+)*\b")
_TOKEN = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf|[^\W\d]+",
                    re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?[\d,]*\d(\.\d*)?([eE][-+]?\d+)?|nan|inf", re.IGNORECASE)


def _ulp(token):
    """One unit in the last printed place of a number as printed: ``13.70`` -> 0.01; relative in scientific
    notation (``2.4e-07`` -> 1e-08, ``0.0e+00`` -> 0); 0 for a number printed without decimals (``13``,
    or NumPy's ``1.``, which stands for exactly 1 whatever the precision of the array)."""
    mantissa, sci, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    if not sci:
        return 10.0 ** -decimals if decimals else 0.0
    value = float(token)
    return 10.0 ** (math.floor(math.log10(abs(value))) - decimals) if value else 0.0


def tokens(line):
    """The words and numbers of ``line`` that a comparison looks at (wrappers, timings, devices and
    frameworks' names replaced); numbers stay strings so that their printed precision is kept."""
    line = _WRAPPERS.sub(" ", _TIMINGS.sub(" TIME ", line))
    line = _MODULES.sub("FRAMEWORK", _DEVICES.sub("DEVICE", line))
    return _TOKEN.findall(line)


def same_token(a, b):
    """Equal words, or numbers within one unit in the last place of the coarser of the two."""
    if a == b:
        return True
    if not (_NUMBER.fullmatch(a) and _NUMBER.fullmatch(b)):
        return False
    x, y = float(a.replace(",", "")), float(b.replace(",", ""))
    if x != x or y != y:  # nan only equals nan, and that case was handled above
        return False
    return abs(x - y) <= max(_ulp(a.replace(",", "")), _ulp(b.replace(",", ""))) * (1 + 1e-9)


def agree(texts):
    """True when the texts (backend -> printed text) are the same up to printing precision."""
    seqs = [tokens(text) for text in texts.values()]
    first = seqs[0]
    return all(len(s) == len(first) and all(map(same_token, s, first)) for s in seqs[1:])


def differing_lines(texts, limit=6):
    """The lines where the backends' texts disagree: a list of {backend: line}, at most ``limit``.

    Lines are paired by position after dropping blank ones; a backend with fewer lines shows ``""``.
    """
    lines = {b: [ln for ln in t.splitlines() if ln.strip()] for b, t in texts.items()}
    rows = []
    for i in range(max(map(len, lines.values()), default=0)):
        row = {b: ls[i] if i < len(ls) else "" for b, ls in lines.items()}
        if not agree(row):
            rows.append(row)
            if len(rows) == limit:
                break
    return rows
