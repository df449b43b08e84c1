"""The data sections' forms (the book's ``#@tab all`` cells, the same on every framework), run with
``import d2lrnn as d2l``: the data hub, the raw text, the Zipf plots, the sentence-length histogram and
the translation arrays. The reader's code here is written for these tests; what it hands ``d2l`` is what
the book's cells pass."""

import collections
import functools
import os
import re

import matplotlib
import numpy as np
import pytest

import d2lrnn as d2l

matplotlib.use("Agg")

#: The SHA-1 the book registers for the time machine, the bundled file's.
TIME_MACHINE_SHA1 = "090b5e7e70c295757f55df93cb0a180b9691891a"


@functools.cache
def pairs_text():
    """The start of the bundled English-French pairs: enough for the few hundred pairs read here."""
    return d2l.read_data_nmt()[:20000]


def first_pairs(count):
    return d2l.tokenize_nmt(d2l.preprocess_nmt(pairs_text()), count)


@pytest.fixture
def hub(monkeypatch):
    """``d2l.DATA_HUB``, put back as it was after the test (the cells register names in it)."""
    for name in list(d2l.DATA_HUB):
        monkeypatch.setitem(d2l.DATA_HUB, name, d2l.DATA_HUB[name])
    yield d2l.DATA_HUB


def test_the_time_machine_cells_read_the_bundled_text_through_the_data_hub(hub):
    hub["time_machine"] = (d2l.DATA_URL + "timemachine.txt", TIME_MACHINE_SHA1)
    with open(d2l.download("time_machine"), encoding="utf-8") as book:
        # the reader's own cleaning: letters only, the runs of anything else one space, lower case
        lines = [" ".join(re.findall("[A-Za-z]+", line)).lower() for line in book]
    assert len(lines) == 3221 and lines[0] == "the time machine by h g wells"  # the book's numbers
    assert lines == d2l.read_time_machine()


def test_the_translation_cells_read_the_bundled_pairs_from_the_extracted_folder(hub):
    hub["fra-eng"] = (d2l.DATA_URL + "fra-eng.zip", "f" * 40)  # the book registers its archive's SHA-1
    folder = d2l.download_extract("fra-eng")
    with open(os.path.join(folder, "fra.txt"), encoding="utf-8") as pairs:
        raw = pairs.read()
    assert raw.startswith("Go.\tVa !") and raw.replace("\r\n", "\n") == d2l.read_data_nmt()


def test_a_dataset_that_is_not_bundled_is_a_one_line_error(hub):
    hub["kaggle_house_test"] = (d2l.DATA_URL + "kaggle_house_pred_test.csv", "f" * 40)
    with pytest.raises(d2l.DataError) as err:
        d2l.download("kaggle_house_test")
    message = str(err.value)
    assert "d2lrnn downloads nothing and bundles no dataset 'kaggle_house_test'" in message
    assert "\n" not in message


def test_the_zipf_cells_plot_the_frequencies_on_log_axes():
    words = [word for line in d2l.tokenize(d2l.read_time_machine()[:400]) for word in line]
    freqs = [count for _, count in d2l.Vocab(words).token_freqs]
    d2l.plot(freqs, xlabel="token: x", ylabel="frequency: n(x)", xscale="log", yscale="log")
    axes = d2l.plt.gca()  # the book's plot returns None; it drew on pyplot's current axes
    (curve,) = axes.get_lines()
    np.testing.assert_array_equal(curve.get_ydata(), freqs)
    np.testing.assert_array_equal(curve.get_xdata(), np.arange(len(freqs)))
    assert (axes.get_xscale(), axes.get_yscale(), axes.get_xlabel()) == ("log", "log", "token: x")

    pair_freqs = [count for _, count in collections.Counter(zip(words, words[1:])).most_common()]
    d2l.plot([freqs, d2l.tensor(pair_freqs)], xlabel="token: x", ylabel="frequency: n(x)",
                    xscale="log", yscale="log", legend=["unigram", "bigram"])
    axes = d2l.plt.gca()  # the book's plot returns None; it drew on pyplot's current axes
    assert [len(curve.get_ydata()) for curve in axes.get_lines()] == [len(freqs), len(pair_freqs)]
    assert [label.get_text() for label in axes.get_legend().get_texts()] == ["unigram", "bigram"]
    d2l.plt.close("all")


def test_plot_takes_one_x_for_every_series_or_one_each():
    x = d2l.arange(0, 2, 0.5)
    d2l.plot(x, [d2l.ones(4), np.full(4, 3.0)], legend=["ones", "threes"])
    axes = d2l.plt.gca()  # the book's plot returns None; it drew on pyplot's current axes
    assert [list(curve.get_xdata()) for curve in axes.get_lines()] == [[0, 0.5, 1, 1.5]] * 2
    assert [list(curve.get_ydata()) for curve in axes.get_lines()] == [[1.0] * 4, [3.0] * 4]
    d2l.plot([x, np.arange(3)], [d2l.ones(4), np.full(3, 3.0)])
    axes = d2l.plt.gca()  # the book's plot returns None; it drew on pyplot's current axes
    assert [list(curve.get_xdata()) for curve in axes.get_lines()] == [[0, 0.5, 1, 1.5], [0, 1, 2]]
    d2l.set_figsize((4, 3))
    assert tuple(d2l.plt.rcParams["figure.figsize"]) == (4, 3)
    d2l.plt.close("all")


def test_the_sentence_length_histogram_counts_tokens_per_sentence():
    source, target = first_pairs(300)
    d2l.show_list_len_pair_hist(["source", "target"], "# tokens per sequence", "count", source, target)
    axes = d2l.plt.gca()  # the book's plot returns None; it drew on pyplot's current axes
    bars = axes.containers
    assert [sum(bar.get_height() for bar in group.patches) for group in bars] == [300, 300]
    assert bars[0].patches[0].get_hatch() is None and all(bar.get_hatch() == "/" for bar in bars[1].patches)
    assert [label.get_text() for label in axes.get_legend().get_texts()] == ["source", "target"]
    d2l.plt.close("all")


def test_the_translation_cells_build_and_batch_their_arrays_with_d2ls_tensor_helpers():
    def padded(sentences, vocab, num_steps):  # the reader's own, on d2l's tensor helpers
        rows = [d2l.truncate_pad(vocab[words] + [vocab["<eos>"]], num_steps, vocab["<pad>"])
                for words in sentences]
        array = d2l.tensor(rows)
        return array, d2l.reduce_sum(d2l.astype(array != vocab["<pad>"], d2l.int32), 1)

    source, target = first_pairs(300)
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = d2l.Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = d2l.Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = padded(source, src_vocab, 6)
    book_array, book_valid_len = d2l.build_array_nmt(source, src_vocab, 6)
    np.testing.assert_array_equal(d2l.numpy(src_array), d2l.numpy(book_array))
    np.testing.assert_array_equal(d2l.numpy(src_valid_len), d2l.numpy(book_valid_len))

    batches = d2l.load_array((src_array, src_valid_len, *padded(target, tgt_vocab, 6)), 3)
    X, X_valid_len, Y, Y_valid_len = next(iter(batches))
    assert [tuple(d2l.shape(t)) for t in (X, X_valid_len, Y, Y_valid_len)] == [(3, 6), (3,), (3, 6), (3,)]
    assert d2l.numpy(d2l.astype(X, d2l.int32)).dtype == np.int32
