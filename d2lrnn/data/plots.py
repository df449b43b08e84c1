"""Zipf's law plot: n-gram frequency against rank on log-log axes."""

from .ngram import ngram_counts

_NAMES = {1: "unigram", 2: "bigram", 3: "trigram"}


def plot_zipf(tokens, ns=(1, 2, 3), ax=None):
    """Plot the frequency of the ``r``-th most common n-gram against ``r`` for each ``n`` in ``ns``.

    Draws on ``ax`` when given, else on a new ``matplotlib.figure.Figure`` (no pyplot, so it
    works without a display); returns the figure.
    """
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.5, 3.2), layout="constrained")
        ax = fig.add_subplot()
    for n in ns:
        freqs = sorted(ngram_counts(tokens, n).values(), reverse=True)
        ax.loglog(range(1, len(freqs) + 1), freqs, label=_NAMES.get(n, f"{n}-gram"))
    ax.set_xlabel("rank")
    ax.set_ylabel("frequency")
    ax.legend()
    return ax.figure
