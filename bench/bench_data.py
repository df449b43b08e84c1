"""Timings of the data pipeline: vocabulary building and one epoch of minibatches.

Run ``python bench/bench_data.py`` (the backend comes from ``D2LRNN_BACKEND``). The
epoch timing is a function, :func:`time_data_epoch`, so the main benchmark can compare it
with a training epoch.
"""

import time

import d2lrnn as d2l
from d2lrnn.data import corpus as _corpus


def _best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def time_vocab(corpus="tinyshakespeare", token="char", repeats=5):
    """Best-of-``repeats`` seconds to read, clean and tokenize ``corpus`` and build its vocabulary
    and index array, from the file each time (the line cache is cleared)."""
    def build():
        _corpus._read_lines.cache_clear()
        d2l.load_corpus(corpus, token)

    return _best_of(build, repeats)


def time_ngram_fit(order=5, tokens=150000, repeats=5):
    """Best-of-``repeats`` seconds to fit the add-k character ``order``-gram model on the first ``tokens``
    tokens of the Time Machine (counting every n-gram of every order up to ``order``)."""
    corpus, vocab = d2l.load_corpus("timemachine")

    def fit():
        d2l.NGramLM(order, k=0.05).fit(corpus[:tokens], len(vocab))

    return _best_of(fit, repeats)


def time_data_epoch(batch_size=32, num_steps=35, use_random_iter=False, repeats=3):
    """Best-of-``repeats`` seconds for one epoch of full Time Machine minibatches, as tensors of the
    active backend (planning the epoch in NumPy included, the corpus already loaded)."""
    loader = d2l.SeqDataLoader(batch_size, num_steps, use_random_iter, -1, seed=0)

    def epoch():
        for _X, _Y in loader:
            pass

    epoch()  # the first conversion may import the framework
    return _best_of(epoch, repeats)


def main():
    results = {
        "vocab + indices, tinyshakespeare chars (target < 0.5 s)": time_vocab(),
        "vocab + indices, tinyshakespeare words": time_vocab(token="word"),
        "5-gram model fit, 150,000 Time Machine chars (target < 0.5 s)": time_ngram_fit(),
        "epoch of Time Machine batches, 32 x 35, sequential": time_data_epoch(use_random_iter=False),
        "epoch of Time Machine batches, 32 x 35, random": time_data_epoch(use_random_iter=True),
    }
    width = max(map(len, results))
    print(f"backend: {d2l.backend_name()}")
    print(f"{'what':<{width}}  seconds")
    for name, seconds in results.items():
        print(f"{name:<{width}}  {seconds:.4f}")
    return results


if __name__ == "__main__":
    main()
