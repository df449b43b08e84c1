"""The bundled corpora, reading and cleaning text, tokenizing, and the token-stream split."""

import hashlib
import re

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn.data import corpus as corpus_module

# From d2lrnn/data/README.md; timemachine.txt's is also the one the book's data hub records.
SHA1 = {
    "timemachine": "090b5e7e70c295757f55df93cb0a180b9691891a",
    "tinyshakespeare": "04486597058d11dcc2c556b1d0433891eb639d2e",
    "hongloumeng": "08181ede8980885fc602f7cb1525359d6c03c94d",
}


@pytest.mark.parametrize("name", d2l.CORPORA)
def test_bundled_corpus_sha1(name):
    assert hashlib.sha1(d2l.corpus_path(name).read_bytes()).hexdigest() == SHA1[name]


def test_corpora_names():
    assert d2l.CORPORA == ("timemachine", "tinyshakespeare", "hongloumeng")
    assert d2l.corpus_path("hongloumeng").name == "hongloumeng-ch1-10.txt"


def test_read_time_machine_book_numbers():
    lines = d2l.read_time_machine()
    assert len(lines) == 3221
    assert lines[0] == "the time machine by h g wells"
    assert lines[10] == "twinkled and his usually pale face was flushed and animated the"
    assert lines[1] == ""  # blank lines stay, as with the book's readlines


def test_tokenize_words_and_chars():
    lines = d2l.read_time_machine()
    assert d2l.tokenize(lines)[0] == ["the", "time", "machine", "by", "h", "g", "wells"]
    assert d2l.tokenize(lines[:1], "char")[0][:5] == ["t", "h", "e", " ", "t"]
    assert d2l.tokenize(["a  b", ""], "word") == [["a", "b"], []]


def test_load_corpus_time_machine_book_numbers():
    corpus, vocab = d2l.load_corpus_time_machine()
    assert isinstance(corpus, list)
    assert len(corpus) == 170580
    assert len(vocab) == 28
    assert vocab.idx_to_token[:10] == ["<unk>", " ", "e", "t", "a", "i", "n", "o", "s", "h"]
    # "the time machine": lines are joined without a separator, as in the book.
    assert vocab.to_tokens(corpus[:16]) == list("the time machine")


def test_load_corpus_max_tokens_keeps_full_vocab():
    corpus, vocab = d2l.load_corpus_time_machine(max_tokens=10000)
    assert len(corpus) == 10000 and len(vocab) == 28


def test_word_corpus_the_count():
    corpus, vocab = d2l.load_corpus("timemachine", token="word")
    assert vocab.token_freqs[:3] == [("the", 2261), ("i", 1267), ("and", 1245)]
    assert vocab["the"] == 1
    assert len(corpus) == 32775 and len(vocab) == 4580
    assert corpus.dtype == np.uint16 and int(np.sum(corpus == 1)) == 2261  # 4,580 words: two bytes each


def test_tinyshakespeare_numbers():
    # The file has 40,000 lines (`wc -l d2lrnn/data/tinyshakespeare.txt`, the char-rnn original). The
    # token counts are pinned from this code on 2026-11-22 after the book's cleaning (non-letters to
    # spaces, lowercase): 26 letters, space and <unk>; the file's checksum is tested above.
    assert len(d2l.read_corpus("tinyshakespeare")) == 40000
    chars, vocab = d2l.load_corpus("tinyshakespeare")
    assert len(chars) == 1026804 and len(vocab) == 28
    words, wvocab = d2l.load_corpus("tinyshakespeare", "word")
    assert len(words) == 208503 and len(wvocab) == 11456


def test_hongloumeng_keeps_every_character_but_line_breaks():
    lines = d2l.read_corpus("hongloumeng")
    assert len(lines) == 348
    assert lines[1].startswith("    此开卷第一回也。作者自云：")
    corpus, vocab = d2l.load_corpus("hongloumeng")
    # README: 69,075 characters and 2,720 distinct with the 347 line breaks; without them
    # 68,728 tokens and 2,719 distinct, plus <unk>.
    assert len(corpus) == 68728 and len(vocab) == 2720
    assert "，" in vocab and "\n" not in vocab


def test_word_tokens_refused_for_cjk():
    with pytest.raises(d2l.DataError, match="no spaces between words: use token='char'"):
        d2l.load_corpus("hongloumeng", token="word")


def test_corpus_by_path_english(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Hello, World!\r\n\r\nIt's 9 o'clock.\n", encoding="utf-8")
    assert d2l.corpus_path(str(path)) == path
    assert d2l.read_corpus(path) == ["hello world", "", "it s o clock"]
    corpus, vocab = d2l.load_corpus(str(path), token="word")
    assert vocab.to_tokens(corpus.tolist()) == ["hello", "world", "it", "s", "o", "clock"]


def test_corpus_by_path_cjk_detected(tmp_path):
    path = tmp_path / "poem.txt"
    path.write_text("床前明月光，\n疑是地上霜。\n", encoding="utf-8")
    assert d2l.read_corpus(path) == ["床前明月光，", "疑是地上霜。"]
    corpus, vocab = d2l.load_corpus(path)
    assert len(corpus) == 12 and len(vocab) == 13


@pytest.mark.parametrize("block, first", [
    ("extension A", 0x3400), ("unified", 0x4E00), ("compatibility", 0xF900), ("extension B", 0x20000),
    ("extension C", 0x2A700), ("extension D", 0x2B740), ("extension E", 0x2B820), ("extension F", 0x2CEB0),
    ("extension I", 0x2EBF0), ("compatibility supplement", 0x2F800), ("extension G", 0x30000),
    ("extension H", 0x31350)])
def test_every_block_of_cjk_ideographs_is_read_as_characters(block, first, tmp_path):
    # Issue 32: text of extension B (beyond U+FFFF) was taken for English and cleaned away.
    line = "".join(chr(first + i) for i in range(5))
    path = tmp_path / "ideographs.txt"
    path.write_text(f"{line}\n{line[::-1]}\n", encoding="utf-8")
    assert d2l.read_corpus(path) == [line, line[::-1]]
    corpus, vocab = d2l.load_corpus(path)
    assert "".join(vocab.to_tokens(corpus.tolist())) == line + line[::-1] and len(vocab) == 6
    with pytest.raises(d2l.DataError, match="no spaces between words: use token='char'"):
        d2l.load_corpus(path, token="word")


def test_byte_order_mark_dropped(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffabc".encode())
    assert d2l.read_corpus(path) == ["abc"]


def test_train_val_split():
    train, val = d2l.train_val_split(list(range(10)), 0.2)
    assert train == list(range(8)) and val == [8, 9]
    assert d2l.train_val_split(list(range(10)), 0) == (list(range(10)), [])
    train, val = d2l.train_val_split(np.arange(170580), 0.1)
    assert (len(train), len(val)) == (153522, 17058)
    assert val[0] == 153522 and isinstance(val, np.ndarray)


def _one_line(err):
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("fraction", [1, 1.5, -0.1])
def test_train_val_split_bad_fraction(fraction):
    with pytest.raises(d2l.DataError, match=r"val_fraction is .*outside \[0, 1\)") as err:
        d2l.train_val_split([1, 2, 3], fraction)
    _one_line(err)


def test_unknown_corpus_name():
    with pytest.raises(d2l.DataError) as err:
        d2l.read_corpus("timemachin")
    assert _one_line(err) == ("unknown corpus 'timemachin': choose one of timemachine, tinyshakespeare, "
                              "hongloumeng, or a path to a UTF-8 text file")


def test_missing_file(tmp_path):
    with pytest.raises(d2l.DataError, match="corpus file '.*nope.txt' does not exist") as err:
        d2l.load_corpus(str(tmp_path / "nope.txt"))
    _one_line(err)


def test_directory_is_not_a_corpus(tmp_path):
    with pytest.raises(d2l.DataError, match="is not a file"):
        d2l.read_corpus(tmp_path)


@pytest.mark.parametrize("content", [b"", b"  \n\n\t"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(d2l.DataError, match="empty.txt' is empty") as err:
        d2l.read_corpus(path)
    _one_line(err)


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(d2l.DataError) as err:
        d2l.read_corpus(path)
    assert _one_line(err) == (f"corpus file '{path}' is not UTF-8 text (byte 0xe9 at offset 3): "
                              "re-save it as UTF-8")


def test_no_tokens_after_cleaning(tmp_path):
    path = tmp_path / "digits.txt"
    path.write_text("1234 5678\n", encoding="utf-8")
    with pytest.raises(d2l.DataError, match="has no char tokens after cleaning"):
        d2l.load_corpus(path)


def test_unknown_token_type():
    with pytest.raises(d2l.DataError, match="unknown token type 'byte': use 'char' or 'word'"):
        d2l.tokenize(["abc"], "byte")
    with pytest.raises(d2l.DataError, match="unknown token type"):
        d2l.load_corpus("timemachine", token="bpe")


def test_indices_are_stored_in_the_smallest_unsigned_type():
    corpus, vocab = d2l.load_corpus("timemachine")
    assert corpus.dtype == np.uint8 and len(vocab) == 28  # one byte per character, not eight
    from d2lrnn.data.corpus import compact, index_dtype

    assert [index_dtype(n) for n in (1, 256, 257, 65536, 65537)] == [np.uint8, np.uint8, np.uint16, np.uint16,
                                                                      np.uint32]
    assert compact(list(range(300))).dtype == np.uint16
    np.testing.assert_array_equal(compact([[3, 1], [2, 0]]), [3, 1, 2, 0])
    assert compact(np.array([], dtype=np.int64)).dtype == np.int64
    assert np.shares_memory(compact(corpus), corpus)  # already compact: no copy


def test_char_stream_is_the_joined_cleaned_lines_for_any_text_and_any_cut(tmp_path):
    # The char tokens come from the file's bytes in pieces cut between two letters
    # (corpus._english_chars); they must equal the book's rule applied line by line and joined.
    rng = np.random.default_rng(0)
    alphabet = list("aAbZ  \t\n\r-.é日😀")
    for _ in range(400):
        text = "".join(rng.choice(alphabet, int(rng.integers(0, 50))))
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        expected = "".join(re.sub("[^A-Za-z]+", " ", line).strip().lower() for line in lines)
        for piece_size in (1, 3, 1000):
            assert corpus_module._english_chars(text.encode(), piece_size) == expected.encode(), text
    shakespeare = corpus_module.corpus_path("tinyshakespeare").read_bytes()
    expected = "".join(d2l.read_corpus("tinyshakespeare")).encode()
    assert corpus_module._english_chars(shakespeare, 4096) == expected
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"\xef\xbb\xbfOne, two!\r\n\r\n  Three -- four\rfive \xc3\xa9t\xc3\xa9\n")
    indices, vocab = d2l.load_corpus(path)
    assert "".join(vocab.to_tokens(indices.tolist())) == "one twothree fourfive t"
