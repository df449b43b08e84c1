"""The data sections' cells (the book's ``#@tab all`` cells, the same for every framework) run with
``import d2lrnn as d2l``: the data hub, reading the raw text, the Zipf plots and the sentence-length
histogram. Written from the book's API, not copied from its cells."""

import collections
import os
import re

import matplotlib
import numpy as np
import pytest

import d2lrnn as d2l

matplotlib.use("Agg")


def test_the_time_machine_cells_read_the_bundled_text_through_the_data_hub():
    sha1 = "090b5e7e70c295757f55df93cb0a180b9691891a"  # the bundled file's, as the book registers it
    d2l.DATA_HUB["time_machine"] = (d2l.DATA_URL + "timemachine.txt", sha1)

    def read_time_machine():  # the reader's own, as the section writes it
        with open(d2l.download("time_machine")) as f:
            lines = f.readlines()
        return [re.sub("[^A-Za-z]+", " ", line).strip().lower() for line in lines]

    lines = read_time_machine()
    assert len(lines) == 3221 and lines[0] == "the time machine by h g wells"  # the book's numbers
    assert lines == d2l.read_time_machine()


def test_the_translation_cells_read_the_bundled_pairs_from_the_extracted_folder():
    d2l.DATA_HUB["fra-eng"] = (d2l.DATA_URL + "fra-eng.zip", "0" * 40)  # the book gives its archive's SHA-1

    def read_data_nmt():
        data_dir = d2l.download_extract("fra-eng")
        with open(os.path.join(data_dir, "fra.txt"), encoding="utf-8") as f:
            return f.read()

    raw_text = read_data_nmt()
    assert raw_text.startswith("Go.\tVa !") and raw_text.replace("\r\n", "\n") == d2l.read_data_nmt()


def test_a_dataset_that_is_not_bundled_is_a_one_line_error():
    d2l.DATA_HUB["kaggle_house_train"] = (d2l.DATA_URL + "kaggle_house_pred_train.csv", "0" * 40)
    try:
        with pytest.raises(d2l.DataError) as err:
            d2l.download("kaggle_house_train")
        assert "d2lrnn downloads nothing and bundles no dataset 'kaggle_house_train'" in str(err.value)
        assert "\n" not in str(err.value)
    finally:
        del d2l.DATA_HUB["kaggle_house_train"]


def test_the_zipf_cells_plot_the_frequencies_on_log_axes():
    tokens = d2l.tokenize(d2l.read_time_machine())
    corpus = [token for line in tokens for token in line]
    freqs = [freq for _, freq in d2l.Vocab(corpus).token_freqs]
    axes = d2l.plot(freqs, xlabel="token: x", ylabel="frequency: n(x)", xscale="log", yscale="log")
    (line,) = axes.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), freqs)
    np.testing.assert_array_equal(line.get_xdata(), np.arange(len(freqs)))
    assert axes.get_xscale() == "log" and axes.get_xlabel() == "token: x"

    bigrams = [pair for pair in zip(corpus[:-1], corpus[1:])]
    bigram_freqs = [freq for _, freq in collections.Counter(bigrams).most_common()]
    axes = d2l.plot([freqs, d2l.tensor(bigram_freqs)], xlabel="token: x", ylabel="frequency: n(x)",
                    xscale="log", yscale="log", legend=["unigram", "bigram"])
    assert [len(line.get_ydata()) for line in axes.get_lines()] == [len(freqs), len(bigram_freqs)]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["unigram", "bigram"]
    d2l.plt.close("all")


def test_plot_takes_x_for_every_series_or_one_each():
    x = d2l.arange(0, 3, 0.5)
    axes = d2l.plot(x, [d2l.ones(6), np.full(6, 2.0)], legend=["a", "b"])
    assert [list(line.get_xdata()) for line in axes.get_lines()] == [[0, 0.5, 1, 1.5, 2, 2.5]] * 2
    assert [list(line.get_ydata()) for line in axes.get_lines()] == [[1.0] * 6, [2.0] * 6]
    d2l.set_figsize((5, 4))
    assert tuple(d2l.plt.rcParams["figure.figsize"]) == (5, 4)
    d2l.plt.close("all")


def test_the_sentence_length_histogram_counts_tokens_per_sentence():
    source, target = d2l.tokenize_nmt(d2l.preprocess_nmt(d2l.read_data_nmt()), 600)
    axes = d2l.show_list_len_pair_hist(["source", "target"], "# tokens per sequence", "count", source, target)
    containers = axes.containers
    counts = [sum(p.get_height() for p in c.patches) for c in containers]
    assert counts == [600, 600]  # every sentence in one bar of its histogram
    assert all(p.get_hatch() == "/" for p in containers[1].patches)
    assert containers[0].patches[0].get_hatch() is None
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["source", "target"]
    d2l.plt.close("all")


def test_the_translation_cells_build_and_batch_their_arrays_with_d2ls_tensor_helpers():
    def build_array_nmt(lines, vocab, num_steps):  # the reader's own, on d2l's tensor helpers
        lines = [vocab[line] + [vocab["<eos>"]] for line in lines]
        array = d2l.tensor([d2l.truncate_pad(line, num_steps, vocab["<pad>"]) for line in lines])
        valid_len = d2l.reduce_sum(d2l.astype(array != vocab["<pad>"], d2l.int32), 1)
        return array, valid_len

    source, target = d2l.tokenize_nmt(d2l.preprocess_nmt(d2l.read_data_nmt()), 600)
    src_vocab = d2l.Vocab(source, min_freq=2, reserved_tokens=["<pad>", "<bos>", "<eos>"])
    tgt_vocab = d2l.Vocab(target, min_freq=2, reserved_tokens=["<pad>", "<bos>", "<eos>"])
    src_array, src_valid_len = build_array_nmt(source, src_vocab, 8)
    expected = d2l.build_array_nmt(source, src_vocab, 8)
    np.testing.assert_array_equal(d2l.numpy(src_array), d2l.numpy(expected[0]))
    np.testing.assert_array_equal(d2l.numpy(src_valid_len), d2l.numpy(expected[1]))

    data_iter = d2l.load_array((src_array, src_valid_len, *build_array_nmt(target, tgt_vocab, 8)), 2)
    X, X_valid_len, Y, Y_valid_len = next(iter(data_iter))
    shapes = [tuple(d2l.shape(t)) for t in (X, X_valid_len, Y, Y_valid_len)]
    assert shapes == [(2, 8), (2,), (2, 8), (2,)]
