"""The book's plotting helpers, as the chapter's cells call them: ``d2l.plot``, ``d2l.set_figsize``,
``d2l.set_axes``, ``d2l.use_svg_display``, ``d2l.show_list_len_pair_hist`` and ``d2l.plt``.

They draw on matplotlib's current figure (pyplot), as the book's do, so a notebook shows the figure
under the cell. Data may be lists, NumPy arrays or tensors of any backend.
"""

import numpy as np

from .. import ops
from ..training.progress import in_notebook


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def use_svg_display():
    """Show figures as SVG in a notebook (sharper than PNG); nothing outside one."""
    try:
        from matplotlib_inline import backend_inline
    except ImportError:  # no IPython display machinery: nothing to set
        return
    if in_notebook():
        backend_inline.set_matplotlib_formats("svg")


def set_figsize(figsize=(3.5, 2.5)):
    """The size (inches) of the figures drawn from now on."""
    use_svg_display()
    _pyplot().rcParams["figure.figsize"] = figsize


def set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend):
    """Label, bound and scale ``axes``, add a legend if ``legend`` names the lines, and draw a grid."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    axes.set_xlim(xlim)
    axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid()


def _values(x):
    """A list, array or tensor as a NumPy array (a list of series stays a list)."""
    return ops.to_numpy(x) if ops.is_tensor(x) else x


def _series(data):
    """``data`` as a list of series: one series (a 1-D array or a list of numbers) becomes ``[data]``."""
    data = _values(data)
    if isinstance(data, np.ndarray):
        return [data] if data.ndim == 1 else list(data)
    if isinstance(data, (list, tuple)) and len(data) and not hasattr(_values(data[0]), "__len__"):
        return [data]
    return [_values(d) for d in data]


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None, xscale="linear",
         yscale="linear", fmts=("-", "m--", "g-.", "r:"), figsize=(3.5, 2.5), axes=None):
    """Plot one or more series: ``plot(Y)`` against their indices, ``plot(X, Y)`` against ``X`` (one
    ``X`` for every ``Y``, or one each), on ``axes`` (pyplot's current ones by default: ``d2l.plt.gca()``).
    Returns None, as the book's (a notebook cell that ends with it shows the figure, no repr)."""
    set_figsize(figsize)
    axes = axes if axes is not None else _pyplot().gca()
    if Y is None:
        Y, X = _series(X), None
    else:
        Y = _series(Y)
        X = _series(X)
        if len(X) != len(Y):
            X = X * len(Y)
    axes.cla()
    for i, (y, fmt) in enumerate(zip(Y, fmts)):
        if X is None:
            axes.plot(y, fmt)
        else:
            axes.plot(X[i], y, fmt)
    set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend)


def show_list_len_pair_hist(legend, xlabel, ylabel, xlist, ylist):
    """Histograms of the lengths of the lists in ``xlist`` and ``ylist`` side by side (the second
    hatched): how long the source and target sentences are, on pyplot's current axes. Returns None, as the
    book's."""
    set_figsize()
    axes = _pyplot().gca()
    _, _, patches = axes.hist([[len(line) for line in xlist], [len(line) for line in ylist]])
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    for patch in patches[1].patches:
        patch.set_hatch("/")
    axes.legend(legend)
