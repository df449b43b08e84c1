"""Progress for long work: a tqdm bar (a widget in notebooks) and a live plot for notebooks."""

import contextlib
import sys


def in_notebook():
    """True inside a Jupyter kernel (where plots and widgets render inline)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return bool(shell) and type(shell).__name__ == "ZMQInteractiveShell"


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass


@contextlib.contextmanager
def progress_bar(total=None, disable=False, **kwargs):
    """A tqdm progress bar as a context manager; a notebook widget when ipywidgets is installed."""
    if disable:
        yield _NoBar()
        return
    bar_cls = None
    if in_notebook():
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as bar_cls
        except ImportError:
            # A text bar in a notebook: each redraw is kept in the cell's output until a
            # front end folds the carriage returns, so redraw at most twice a second.
            kwargs.setdefault("mininterval", 0.5)
    if bar_cls is None:
        from tqdm import tqdm as bar_cls
    with bar_cls(total=total, dynamic_ncols=True, **kwargs) as bar:
        yield bar


class Animator:
    """Plot data points as they arrive (the book's ``Animator``), redrawn in place in notebooks.

    ``enabled=None`` draws only inside a notebook; in a terminal nothing is drawn (the
    command line saves a PNG at the end instead).
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None, xscale="linear",
                 yscale="linear", fmts=("-", "m--", "g-.", "r:"), figsize=(4.5, 3), enabled=None):
        self.enabled = in_notebook() if enabled is None else bool(enabled)
        self.X, self.Y, self.fmts, self.legend = None, None, fmts, legend or []
        if not self.enabled:
            return
        import matplotlib.pyplot as plt

        self.fig, self.axes = plt.subplots(figsize=figsize)
        self.config = dict(xlabel=xlabel, ylabel=ylabel, xlim=xlim, ylim=ylim, xscale=xscale,
                           yscale=yscale)
        self._display = None
        # Show the empty axes now, so that text printed meanwhile (a progress bar) comes below
        # the plot instead of being split around it when the first point arrives.
        self._draw()

    def add(self, x, y):
        """Add one point per line: ``y`` is a number or a list (one value per line)."""
        y = list(y) if hasattr(y, "__len__") else [y]
        x = list(x) if hasattr(x, "__len__") else [x] * len(y)
        if self.X is None:
            self.X, self.Y = [[] for _ in y], [[] for _ in y]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(a)
                self.Y[i].append(b)
        if self.enabled:
            self._draw()

    def _draw(self):
        from IPython import display

        ax = self.axes
        ax.cla()
        for x, y, fmt in zip(self.X or [], self.Y or [], self.fmts):
            ax.plot(x, y, fmt)
        c = self.config
        ax.set_xlabel(c["xlabel"])
        ax.set_ylabel(c["ylabel"])
        ax.set_xscale(c["xscale"])
        ax.set_yscale(c["yscale"])
        if c["xlim"]:
            ax.set_xlim(c["xlim"])
        if c["ylim"]:
            ax.set_ylim(c["ylim"])
        if self.legend and ax.lines:
            ax.legend(self.legend)
        ax.grid(True)
        if self._display is None:
            self._display = display.display(self.fig, display_id=True)
        else:
            self._display.update(self.fig)

    def close(self):
        """Stop drawing (in notebooks the last frame stays as the cell's output)."""
        if self.enabled:
            import matplotlib.pyplot as plt

            plt.close(self.fig)
