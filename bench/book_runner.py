"""What runs inside each of ``book_check.py``'s processes: one section's cells, in one namespace.

    python -c "$RUNNER" cells.json report.json /path/to/bench/book_runner.py

``book_check.RUNNER`` loads this file by its path rather than as ``bench.book_runner``, so the cells'
imports see neither ``bench/`` nor another checkout's copy of it. ``cells.json`` holds the sources
and the run's options; ``report.json`` gets how far the cells got and what the trainings drew.

Options (all optional; without them the cells run as plain ``exec`` in order):

* ``tab``: the framework d2lbook would have selected. The English edition's sources are notebooks
  of d2lbook, whose cells ask ``tab.selected('pytorch', ...)``; the namespace gets a ``tab`` that
  answers for this framework, as ``%load_ext d2lbook.tab`` does when a reader selects it.
* ``seed``: Python's, NumPy's and the framework's random generators are seeded before the first
  cell, so a run is repeatable; with d2lrnn's face (no ``offline``) d2lrnn's own generator too.
* ``record``: once the cells have imported ``d2l``, every ``d2l.Trainer.fit`` and every point drawn
  through ``d2l.ProgressBoard.draw`` is recorded (the board still draws). ``draw(x, y, label,
  every_n)`` is the book's class API: the board plots the mean of each ``every_n`` points it is
  given under a label, and the report keeps, per fit and label, the last such mean.
* ``offline``: ``{file name: path}``; ``d2l.download`` answers those names with the file placed
  there (the bundled corpora) and refuses any other, so the book's own package downloads nothing.
"""

import importlib
import json
import random
import traceback


class Tab:
    """d2lbook's ``tab`` for one selected framework."""

    def __init__(self, selected):
        self.name = selected

    def selected(self, *tabs):
        """Whether the selected framework is among ``tabs`` (one list of them also works)."""
        if len(tabs) == 1 and isinstance(tabs[0], (list, tuple)):
            tabs = tabs[0]
        return self.name in tabs

    def interact_select(self, *tabs):
        """The notebook's picker: the framework is already chosen."""


#: The module to seed for each framework tab, and how.
SEEDERS = {
    "pytorch": ("torch", "manual_seed"),
    "mxnet": ("mxnet.random", "seed"),
    "tensorflow": ("tensorflow.random", "set_seed"),
}


def seed_everything(seed, framework, d2lrnn_face=False):
    """Seed Python's and NumPy's generators, and the framework's where it has a global one; with
    d2lrnn's face also d2lrnn's own generator (its parameters, data draws and shuffles), which nothing
    else reaches: without it a d2lrnn run drew the same numbers whatever the seed."""
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass
    if framework in SEEDERS:
        module, function = SEEDERS[framework]
        getattr(importlib.import_module(module), function)(seed)
    if d2lrnn_face:
        importlib.import_module("d2lrnn").manual_seed(seed)


class Recorder:
    """What each ``Trainer.fit`` draws on its progress board: per fit, the last point of each label.

    A point is what the board plots: the mean ``(x, y)`` of each ``every_n`` consecutive calls of
    ``draw`` for one label on one board.
    """

    def __init__(self):
        self.fits = []  # one {label: [x, y]} per fit, in order
        self.pending = {}  # (board id, label) -> the calls not yet averaged
        self.watched = set()

    def start_fit(self):
        self.fits.append({})

    def drawn(self, board, x, y, label, every_n=1):
        """One call of ``board.draw``: keep it; at every ``every_n``-th, record the mean point. Under
        an ``every_n`` of 0 the board draws nothing (a count of batches below the points asked for)."""
        if int(every_n) < 1:
            return
        calls = self.pending.setdefault((id(board), label), [])
        calls.append((float(x), float(y)))
        if len(calls) == int(every_n):
            if not self.fits:
                self.start_fit()  # drawn outside any fit: a record of its own
            self.fits[-1][label] = [sum(c[0] for c in calls) / len(calls),
                                    sum(c[1] for c in calls) / len(calls)]
            calls.clear()

    def watch(self, d2l):
        """Wrap ``d2l.Trainer.fit`` and ``d2l.ProgressBoard.draw`` once; a missing one is left alone."""
        if d2l is None or id(d2l) in self.watched:
            return
        self.watched.add(id(d2l))
        trainer, board = getattr(d2l, "Trainer", None), getattr(d2l, "ProgressBoard", None)
        if isinstance(trainer, type) and callable(getattr(trainer, "fit", None)):
            trainer.fit = self._wrap_fit(trainer.fit)
        if isinstance(board, type) and callable(getattr(board, "draw", None)):
            board.draw = self._wrap_draw(board.draw)

    def _wrap_fit(self, fit):
        recorder = self

        def recorded_fit(self, *args, **kwargs):
            recorder.start_fit()
            return fit(self, *args, **kwargs)
        return recorded_fit

    def _wrap_draw(self, draw):
        recorder = self

        def recorded_draw(self, x, y, label, every_n=1, *args, **kwargs):
            try:
                recorder.drawn(self, x, y, label, every_n)
            except (TypeError, ValueError):  # a point that is not a number: the board's business
                pass
            return draw(self, x, y, label, every_n, *args, **kwargs)
        return recorded_draw


def offline_download(d2l, files):
    """Replace ``d2l.download`` with one that answers only the names in ``files``.

    Covers both editions' signatures: ``download(url, folder, sha1_hash)`` (1.x) and
    ``download(name, cache_dir)`` (2.x, a ``DATA_HUB`` name), the URL looked up in ``DATA_HUB``.
    """
    if d2l is None or not callable(getattr(d2l, "download", None)) or getattr(d2l.download, "offline", False):
        return

    def download(url, *args, **kwargs):
        hub = getattr(d2l, "DATA_HUB", {})
        if url in hub:
            url = hub[url][0]
        name = url.split("/")[-1]
        if name not in files:
            raise RuntimeError(f"book_check: {url} is not among the bundled files "
                               f"({', '.join(sorted(files))}); nothing is downloaded")
        return files[name]
    download.offline = True
    d2l.download = download


#: Keras wraps an error raised inside a layer under this line; the error itself is on the next one.
KERAS_WRAPPER = "Exception encountered when calling"


def summary(error):
    """An exception's message in one line: its first line (two under Keras's wrapper line)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
    return " ".join(lines[:2]) if lines[0].startswith(KERAS_WRAPPER) else lines[0]


def run(cells, options, namespace=None):
    """Run the sources in order in one namespace; ``{"ran": n, "error": ..., "fits": [...]}``."""
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    result, recorder = {"ran": 0}, Recorder()
    if options.get("tab"):
        namespace["tab"] = Tab(options["tab"])
    if options.get("seed") is not None:
        # the book's package runs offline (its downloads answered from d2lrnn's corpora): d2lrnn's face not
        seed_everything(options["seed"], options.get("tab"), d2lrnn_face="offline" not in options)
    for i, source in enumerate(cells):
        try:
            exec(compile(source, f"<cell {i}>", "exec"), namespace)
        except BaseException as e:
            result["error"] = f"cell {i}: {type(e).__name__}: {summary(e)}"
            traceback.print_exc()
            break
        result["ran"] = i + 1
        if options.get("record"):
            recorder.watch(namespace.get("d2l"))
        if options.get("offline"):
            offline_download(namespace.get("d2l"), options["offline"])
    if options.get("record"):
        result["fits"] = recorder.fits
    return result


def main(argv):
    job = json.load(open(argv[0]))
    result = run(job["cells"], job.get("options", {}))
    with open(argv[1], "w") as f:
        json.dump(result, f)
