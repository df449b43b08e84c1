"""Progress for long work: a tqdm bar in terminals, one line redrawn in place in notebooks, and a
live plot for notebooks."""

import contextlib
import sys
import time

#: A notebook's progress line is redrawn at most this often (seconds); it is drawn once more at the end.
NOTEBOOK_REFRESH = 0.5
#: The share of a run's time the live plot may spend drawing: a frame takes ~0.1-0.2 s to render (more
#: than many quick epochs take), so after a frame that took d seconds the next waits d (1 - s) / s.
PLOT_TIME_SHARE = 0.1


def in_notebook():
    """True inside a Jupyter kernel (where plots and widgets render inline)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return bool(shell) and type(shell).__name__ == "ZMQInteractiveShell"


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass


def _plural(unit, n):
    if n == 1:
        return unit
    return unit + ("es" if unit.endswith(("s", "x", "ch", "sh")) else "s")


class NotebookProgress:
    """A progress line for notebooks: one display output, updated in place and rate-limited.

    tqdm in a kernel writes every redraw to stderr, where a saved notebook keeps each one, and
    its widget needs a live front end (a saved notebook shows it frozen at its first frame).
    This line is a plain-text display whose last state is what the notebook keeps, e.g.
    ``train: 40/40 batches, 1.2 s, ppl 17.83, val_ppl 17.57``. Same interface as the tqdm bar.
    """

    def __init__(self, total=None, desc=None, unit="it", min_interval=NOTEBOOK_REFRESH, clock=None):
        from IPython import display

        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.postfix = {}
        self.min_interval, self._clock = min_interval, clock or time.perf_counter
        self._start = self._shown_at = self._clock()
        self._handle = display.display(self._bundle(), raw=True, display_id=True)

    def text(self):
        """The line as it reads now."""
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        parts = [f"{count} {_plural(self.unit, self.total if self.total is not None else self.n)}",
                 f"{self._clock() - self._start:.1f} s"]
        parts += [f"{key} {value}" for key, value in self.postfix.items()]
        line = ", ".join(parts)
        return f"{self.desc}: {line}" if self.desc else line

    def _bundle(self):
        return {"text/plain": self.text()}

    def refresh(self):
        """Redraw the line now."""
        self._shown_at = self._clock()
        self._handle.update(self._bundle(), raw=True)

    def _maybe_refresh(self):
        if self._clock() - self._shown_at >= self.min_interval:
            self.refresh()

    def update(self, n=1):
        """Count ``n`` more units done; redraw if the last redraw is ``min_interval`` old."""
        self.n += n
        self._maybe_refresh()

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
        """Show these ``key value`` pairs after the count (tqdm's ``set_postfix``)."""
        self.postfix = {**(ordered_dict or {}), **kwargs}
        if refresh:
            self._maybe_refresh()

    def close(self):
        """Draw the final state."""
        self.refresh()


@contextlib.contextmanager
def progress_bar(total=None, disable=False, **kwargs):
    """A progress bar as a context manager: tqdm (on stderr) in a terminal, a line in notebooks.

    The yielded object has ``update(n=1)`` and ``set_postfix(dict, refresh=True)``; the other
    keywords go to tqdm (a notebook line uses ``desc`` and ``unit``).
    """
    if disable:
        yield _NoBar()
        return
    if in_notebook():
        bar = NotebookProgress(total=total, desc=kwargs.get("desc"), unit=kwargs.get("unit", "it"))
        try:
            yield bar
        finally:
            bar.close()
        return
    from tqdm import tqdm

    with tqdm(total=total, dynamic_ncols=True, **kwargs) as bar:
        yield bar


class Animator:
    """Plot data points as they arrive (the book's ``Animator``), redrawn in place in notebooks.

    ``title`` is shown above the axes. ``enabled=None`` draws only inside a notebook; in a
    terminal nothing is drawn (the command line saves a PNG at the end instead). Points that
    arrive faster than ``min_interval`` seconds apart are drawn together with the next one, and
    drawing takes at most :data:`PLOT_TIME_SHARE` of the time (a frame takes ~0.1-0.2 s to render);
    ``close()`` draws the last frame.
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None, xscale="linear",
                 yscale="linear", fmts=("-", "m--", "g-.", "r:"), nrows=1, ncols=1, figsize=(4.5, 3),
                 enabled=None, title=None, min_interval=NOTEBOOK_REFRESH, clock=None):
        self.enabled = in_notebook() if enabled is None else bool(enabled)
        self.X, self.Y, self.fmts, self.legend = None, None, fmts, legend or []
        self.min_interval, self._clock, self._stale = min_interval, clock or time.perf_counter, False
        if not self.enabled:
            return
        import matplotlib.pyplot as plt

        # the book's grid of nrows x ncols axes, drawing on the first
        self.fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
        self.axes = axes[0, 0]
        self.config = dict(xlabel=xlabel, ylabel=ylabel, xlim=xlim, ylim=ylim, xscale=xscale,
                           yscale=yscale, title=title)
        self._set_axes()
        # Take the plot's place in the output now (an empty output, updated in place with the first
        # frame), so that text printed meanwhile (a progress bar) comes below the plot; rendering the
        # empty axes would cost a frame.
        from IPython import display

        self._display = display.display({"text/plain": ""}, raw=True, display_id=True)
        self._drawn_at, self._draw_seconds, self._stale = self._clock(), 0.0, True  # nothing shown yet

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
        self._stale = True
        if self.enabled and self._clock() - self._drawn_at >= self._wait():
            self._draw()

    def _wait(self):
        """Seconds between frames: ``min_interval``, or longer where frames are slow to render."""
        return max(self.min_interval, self._draw_seconds * (1 - PLOT_TIME_SHARE) / PLOT_TIME_SHARE)

    def _set_axes(self):
        """Labels, scales, limits, title and grid from the constructor's arguments."""
        ax, c = self.axes, self.config
        ax.set_xlabel(c["xlabel"])
        ax.set_ylabel(c["ylabel"])
        ax.set_xscale(c["xscale"])
        ax.set_yscale(c["yscale"])
        if c["title"]:
            ax.set_title(c["title"])
        if c["xlim"]:
            ax.set_xlim(c["xlim"])
        if c["ylim"]:
            ax.set_ylim(c["ylim"])
        if self.legend and ax.lines:
            ax.legend(self.legend)
        ax.grid(True)

    def _draw(self):
        start = self._clock()
        self.axes.cla()
        for x, y, fmt in zip(self.X or [], self.Y or [], self.fmts):
            self.axes.plot(x, y, fmt)
        self._set_axes()
        self._display.update(self.fig)
        self._drawn_at, self._stale = self._clock(), False
        self._draw_seconds = self._drawn_at - start

    def close(self):
        """Draw the points not drawn yet and stop (in notebooks the last frame stays as the cell's output)."""
        if self.enabled:
            import matplotlib.pyplot as plt

            if self._stale:  # points not drawn yet, or none at all: the empty axes
                self._draw()
            plt.close(self.fig)
