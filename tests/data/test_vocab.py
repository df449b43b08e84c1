"""Vocab: index order, lookups both ways, min_freq, reserved tokens, and the plain-data round trip."""

import json

import numpy as np
import pytest

import d2lrnn as d2l

LINES = [["a", "b", "b"], ["c", "a", "b"]]  # b: 3, a: 2, c: 1


def test_order_unk_then_frequency():
    vocab = d2l.Vocab(LINES)
    assert vocab.idx_to_token == ["<unk>", "b", "a", "c"]
    assert vocab.token_to_idx == {"<unk>": 0, "b": 1, "a": 2, "c": 3}
    assert vocab.token_freqs == [("b", 3), ("a", 2), ("c", 1)]
    assert len(vocab) == 4 and vocab.unk == 0


def test_ties_keep_first_appearance():
    vocab = d2l.Vocab(["y", "x", "x", "y", "z", "w"])
    assert vocab.idx_to_token == ["<unk>", "y", "x", "z", "w"]


def test_reserved_tokens_follow_unk():
    vocab = d2l.Vocab(LINES, reserved_tokens=["<pad>", "<bos>", "<eos>"])
    assert vocab.idx_to_token == ["<unk>", "<pad>", "<bos>", "<eos>", "b", "a", "c"]
    assert vocab["<eos>"] == 3


def test_lookups_and_unknown_tokens():
    vocab = d2l.Vocab(LINES)
    assert vocab["a"] == 2
    assert vocab["zzz"] == 0
    assert vocab[["a", "zzz", "c"]] == [2, 0, 3]
    assert vocab[("b", "a")] == [1, 2]
    assert vocab[[["a", "b"], ["c"], []]] == [[2, 1], [3], []]
    assert vocab.to_tokens(3) == "c"
    assert vocab.to_tokens([1, 2, 0]) == ["b", "a", "<unk>"]
    assert vocab.to_tokens(np.array([[1], [3]])) == [["b"], ["c"]]
    assert vocab.to_tokens(np.int64(2)) == "a"
    assert "a" in vocab and "zzz" not in vocab


def test_min_freq():
    vocab = d2l.Vocab(LINES, min_freq=2)
    assert vocab.idx_to_token == ["<unk>", "b", "a"]
    assert vocab["c"] == 0
    assert vocab.token_freqs[-1] == ("c", 1)  # the counts still cover every token


def test_min_freq_leaving_only_unk():
    with pytest.raises(d2l.DataError) as err:
        d2l.Vocab(LINES, min_freq=4, reserved_tokens=["<pad>"])
    assert str(err.value) == ("min_freq=4 leaves no token in the vocabulary (the most frequent one occurs "
                              "3 times): use min_freq <= 3")


def test_empty_vocab():
    vocab = d2l.Vocab()
    assert vocab.idx_to_token == ["<unk>"] and vocab["a"] == 0


def test_count_corpus_flat_and_nested():
    assert d2l.count_corpus(["a", "b", "a"]) == {"a": 2, "b": 1}
    assert d2l.count_corpus(LINES) == {"a": 2, "b": 3, "c": 1}
    assert d2l.count_corpus([]) == {}


def test_plain_data_round_trip():
    vocab = d2l.Vocab(LINES, reserved_tokens=["<pad>"])
    data = json.loads(json.dumps(vocab.to_dict()))
    again = d2l.Vocab.from_dict(data)
    assert again == vocab
    assert again.token_to_idx == vocab.token_to_idx
    assert again.token_freqs == vocab.token_freqs


def test_from_tokens_list_rebuilds_time_machine_vocab():
    _, vocab = d2l.load_corpus_time_machine()
    again = d2l.Vocab.from_tokens_list(list(vocab.idx_to_token))
    assert again == vocab
    assert all(again[t] == i for i, t in enumerate(vocab.idx_to_token))
    assert again["?"] == 0


@pytest.mark.parametrize("tokens, what", [(["a", "<unk>"], "must start with '<unk>', not 'a'"),
                                          ([], "not nothing"),
                                          (["<unk>", "a", "a"], "token 'a' appears twice")])
def test_from_tokens_list_bad_lists(tokens, what):
    with pytest.raises(d2l.DataError, match=what):
        d2l.Vocab.from_tokens_list(tokens)


@pytest.mark.parametrize("index, message", [
    (-1, "token index -1 is outside the vocabulary \\(0 to 3\\)"),  # used to return the last token
    (4, "token index 4 is outside the vocabulary"),
    (1.0, "a token index must be a whole number, got 1.0"),
    (True, "a token index must be a whole number, got True"),
])
def test_to_tokens_refuses_indices_outside_the_vocabulary(index, message):
    vocab = d2l.Vocab(list("abc"))
    assert vocab.to_tokens([0, 3]) == ["<unk>", "c"]
    with pytest.raises(d2l.ArgumentError, match=message):
        vocab.to_tokens(index)
