"""``raw=True``: every character of the file is a token (case, punctuation and line breaks kept), with
the same vocabulary rules, compact indices, iterators and split as the cleaned character stream."""

import codecs

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn.data import read_raw_text
from tests.conftest import token_dtype


def _file_text(path):
    """The file's text as raw=True should see it, computed independently of d2lrnn."""
    data = path.read_bytes()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _decode(indices, vocab):
    return "".join(vocab.to_tokens(np.asarray(indices).tolist()))


def _one_line(err):
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", d2l.CORPORA)
def test_raw_stream_decodes_back_to_the_file(name):
    indices, vocab = d2l.load_corpus(name, raw=True)
    text = _file_text(d2l.corpus_path(name))
    assert read_raw_text(name) == text
    assert len(indices) == len(text)
    assert _decode(indices, vocab) == text
    assert indices.dtype == np.uint8 or len(vocab) > 256  # compact, as the cleaned stream
    assert vocab.idx_to_token[0] == "<unk>" and 0 not in set(np.unique(indices).tolist())


def test_tinyshakespeare_raw_has_65_characters():
    indices, vocab = d2l.load_corpus("tinyshakespeare", raw=True)
    assert len(vocab) == 66  # 65 characters and <unk>
    assert set(vocab.idx_to_token[1:]) == set(_file_text(d2l.corpus_path("tinyshakespeare")))
    assert {"\n", "A", "a", "!", "'", "$", "&", "3"} <= set(vocab.idx_to_token)
    assert vocab.idx_to_token[1] == " " and indices.dtype == np.uint8
    # Ties are broken by first appearance, and the counts are the text's.
    assert vocab.token_freqs[:2] == [(" ", 169892), ("e", 94611)]


def test_bom_and_crlf_file(tmp_path):
    path = tmp_path / "crlf.txt"
    text = "First Citizen:\r\nBefore we proceed,\rany further!\r\n\r\nÆsop's — ok\n"
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    expected = "First Citizen:\nBefore we proceed,\nany further!\n\nÆsop's — ok\n"
    assert _file_text(path) == expected
    assert read_raw_text(path) == expected
    indices, vocab = d2l.load_corpus(path, raw=True)
    assert _decode(indices, vocab) == expected
    assert "\r" not in vocab and "\ufeff" not in vocab and "\n" in vocab and "Æ" in vocab
    assert len(vocab) == len(set(expected)) + 1


def test_split_is_the_last_tenth():
    indices, vocab = d2l.load_corpus("tinyshakespeare", raw=True)
    train_iter, val_iter, vocab2 = d2l.load_data_lm("tinyshakespeare", 64, 64, raw=True, seed=0)
    assert vocab2 == vocab
    cut = len(indices) - int(round(len(indices) * 0.1))
    assert cut == 1003855
    np.testing.assert_array_equal(train_iter.corpus, indices[:cut])
    np.testing.assert_array_equal(val_iter.corpus, indices[cut:])
    text = _file_text(d2l.corpus_path("tinyshakespeare"))
    assert _decode(val_iter.corpus, vocab) == text[cut:]
    X, Y = next(iter(train_iter))  # the same iterators: integer batches, Y one token ahead
    X, Y = d2l.ops.to_numpy(X), d2l.ops.to_numpy(Y)
    assert X.shape == (64, 64) and X.dtype == token_dtype()
    np.testing.assert_array_equal(X[:, 1:], Y[:, :-1])


def test_max_tokens_and_loader(tmp_path):
    indices, vocab = d2l.load_corpus("tinyshakespeare", raw=True, max_tokens=1000)
    assert len(indices) == 1000 and len(vocab) == 66  # the vocabulary of the whole text
    loader = d2l.SeqDataLoader(4, 10, False, 1000, "tinyshakespeare", raw=True)
    np.testing.assert_array_equal(loader.corpus, indices)


def test_default_is_unchanged():
    for name, size in (("timemachine", 28), ("tinyshakespeare", 28)):
        default, vocab = d2l.load_corpus(name)
        cleaned, vocab2 = d2l.load_corpus(name, raw=False)
        assert len(vocab) == size and vocab2 == vocab
        np.testing.assert_array_equal(default, cleaned)
        assert _decode(default, vocab) == "".join(d2l.read_corpus(name))
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 32, 35)
    assert len(vocab) == 28 and len(train_iter.corpus) + len(val_iter.corpus) == 170580


def test_punctuation_only_file_is_a_raw_corpus(tmp_path):
    path = tmp_path / "digits.txt"
    path.write_text("1234, 5678!\n", encoding="utf-8")
    indices, vocab = d2l.load_corpus(path, raw=True)
    assert _decode(indices, vocab) == "1234, 5678!\n"
    with pytest.raises(d2l.DataError, match="has no char tokens after cleaning"):
        d2l.load_corpus(path)


@pytest.mark.parametrize("content", [b"", b"  \r\n\n\t", codecs.BOM_UTF8])
def test_raw_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(d2l.DataError, match="empty.txt' is empty"):
        d2l.load_corpus(path, raw=True)


def test_raw_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1"))
    with pytest.raises(d2l.DataError, match="is not UTF-8 text") as err:
        d2l.load_corpus(path, raw=True)
    _one_line(err)


def test_raw_words_refused():
    with pytest.raises(d2l.DataError) as err:
        d2l.load_corpus("tinyshakespeare", token="word", raw=True)
    assert "use token='char' with raw=True" in _one_line(err)
    with pytest.raises(d2l.DataError, match="token='char'"):
        d2l.load_data_lm("tinyshakespeare", 4, 4, token="word", raw=True)
