"""Translation pairs: the bundled file, the book's preprocessing, padded arrays, minibatches, the split."""

import hashlib

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.data import translation as nmt
from tests.conftest import token_dtype


def test_the_bundled_pairs_are_the_shared_file_and_every_line_is_a_pair():
    assert hashlib.sha1(nmt.PAIRS_FILE.read_bytes()).hexdigest() == "de0b57105785086e2901a4e1eedf19072d4a2fde"
    source, target = nmt.tokenize_nmt(nmt.preprocess_nmt(nmt.read_data_nmt()))
    assert len(source) == len(target) == 18066
    assert source[:3] == [["go", "."], ["run", "!"], ["run", "!"]]
    assert target[:3] == [["va", "!"], ["cours", "!"], ["courez", "!"]]


def test_preprocessing_by_hand():
    # a non-breaking space before '!' becomes a space; a space is put before '.' and ',' where none is
    assert nmt.preprocess_nmt("Go.\tVa !\nRun!\tCours\u202f!\nHi, Tom.\tSalut,\xa0Tom.") == \
        "go .\tva !\nrun !\tcours !\nhi , tom .\tsalut , tom ."
    assert nmt.preprocess_nmt(".Hi") == ".hi"  # nothing is put before the first character


def _book_preprocess(text):
    """The book's preprocessing, character by character (the rule preprocess_nmt implements faster)."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    return "".join(" " + c if i > 0 and c in ",.!?" and text[i - 1] != " " else c for i, c in enumerate(text))


@pytest.mark.once
def test_preprocessing_is_the_books_rule_on_the_pairs_and_on_random_texts():
    text = nmt.read_data_nmt()
    assert nmt.preprocess_nmt(text) == _book_preprocess(text)
    rng = np.random.default_rng(0)
    alphabet = list("aB  ,.!?\n\t\u202f\xa0")  # runs of marks and spaces, marks first and last
    for _ in range(5000):
        sample = "".join(rng.choice(alphabet, size=rng.integers(0, 10)))
        assert nmt.preprocess_nmt(sample) == _book_preprocess(sample), repr(sample)


def test_tokenize_takes_exactly_num_examples_pairs_and_skips_blank_lines():
    source, target = nmt.tokenize_nmt("a b\tc\n\nd\te f\ng\th\n", num_examples=2)
    assert (source, target) == ([["a", "b"], ["d"]], [["c"], ["e", "f"]])
    source, _ = nmt.tokenize_nmt(nmt.preprocess_nmt(nmt.read_data_nmt()), 600)
    assert len(source) == 600


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_end_reads_the_same_pairs(end, tmp_path):
    # Issue 32: a file with CR-only line ends (classic Mac) was refused as one malformed line.
    path = tmp_path / "pairs.txt"
    path.write_bytes(end.join(["Go.\tVa !", "Hi.\tSalut.", "", "Run!\tCours !"]).encode() + end.encode())
    source, target = nmt.tokenize_nmt(nmt.preprocess_nmt(nmt.read_data_nmt(path)))
    assert source == [["go", "."], ["hi", "."], ["run", "!"]]
    assert target == [["va", "!"], ["salut", "."], ["cours", "!"]]


def test_truncate_pad_and_arrays_by_hand():
    assert nmt.truncate_pad([5, 6], 4, 1) == [5, 6, 1, 1]
    assert nmt.truncate_pad([5, 6, 7, 8, 9], 4, 1) == [5, 6, 7, 8]
    vocab = d2l.Vocab([["a", "b"], ["a"]], reserved_tokens=list(nmt.RESERVED))
    assert vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    a, b = vocab["a"], vocab["b"]
    array, valid_len = nmt.build_array_nmt([["a", "b"], ["b", "x"], ["a", "a", "a", "a"]], vocab, 4)
    np.testing.assert_array_equal(ops.to_numpy(array), [[a, b, 3, 1], [b, 0, 3, 1], [a, a, a, a]])
    np.testing.assert_array_equal(ops.to_numpy(valid_len), [3, 3, 4])  # '<eos>' counts; cut at num_steps


def test_load_data_nmt_gives_the_books_shapes_and_the_same_batches_on_every_backend():
    d2l.manual_seed(0)
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size=2, num_steps=8)
    X, X_valid_len, Y, Y_valid_len = next(iter(train_iter))
    assert [ops.shape(t) for t in (X, X_valid_len, Y, Y_valid_len)] == [(2, 8), (2,), (2, 8), (2,)]
    assert len(train_iter) == 300 and train_iter.num_pairs == 600
    # the rows are those NumPy's generator picks for the seed, whatever the backend
    source, target = nmt.tokenize_nmt(nmt.preprocess_nmt(nmt.read_data_nmt()), 600)
    rows = np.random.default_rng(0).permutation(600)[:2]
    src, src_len = nmt.build_array_nmt_numpy(source, src_vocab, 8)
    tgt, _ = nmt.build_array_nmt_numpy(target, tgt_vocab, 8)
    np.testing.assert_array_equal(ops.to_numpy(X), src[rows])
    np.testing.assert_array_equal(ops.to_numpy(X_valid_len), src_len[rows])
    np.testing.assert_array_equal(ops.to_numpy(Y), tgt[rows])
    assert ops.to_numpy(X).dtype == token_dtype()
    # min_freq 2: a word seen once reads as <unk>
    once = [w for w, c in d2l.count_corpus(source).items() if c == 1]
    assert once and all(src_vocab[w] == 0 for w in once)


def test_the_split_holds_out_pairs_and_builds_the_vocabularies_from_training_pairs_only():
    train_iter, val_iter, src_vocab, tgt_vocab = nmt.load_data_nmt_split(64, 10, val_fraction=0.1, seed=0)
    assert (train_iter.num_pairs, val_iter.num_pairs) == (16259, 1807)
    assert len(val_iter.source) == 1807 and val_iter.target[0]
    source, target = nmt.tokenize_nmt(nmt.preprocess_nmt(nmt.read_data_nmt()))
    held = set(np.sort(np.random.default_rng(0).permutation(len(source))[:1807]).tolist())
    train_words = {w for i, line in enumerate(source) if i not in held for w in line}
    assert set(src_vocab.idx_to_token) - set(nmt.RESERVED) - {"<unk>"} <= train_words
    again = nmt.load_data_nmt_split(64, 10, val_fraction=0.1, seed=0)
    assert again[2].idx_to_token == src_vocab.idx_to_token and again[1].target == val_iter.target
    first = [ops.to_numpy(t) for t in next(iter(val_iter))]  # in the file's order: not shuffled
    np.testing.assert_array_equal(first[0], [ops.to_numpy(t) for t in next(iter(val_iter))][0])


@pytest.mark.parametrize("content, message", [
    (b"go .\tva !\nno tab here\n", "line 2 of the pairs is not 'source<TAB>target'"),
    (b"a\tb\tc\n", "line 1 of the pairs is not"),
    (b"\n\n", "holds no sentence pairs"),
    (b"\xff\xfe\x00a", "is not UTF-8 text"),
])
def test_a_malformed_pairs_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "pairs.txt"
    path.write_bytes(content)
    with pytest.raises(d2l.DataError) as err:
        nmt.load_data_nmt_split(2, 5, path=path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_split_settings_are_one_line(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text("a\tb\nc\td\n")
    cases = ((0, "val_fraction is 0"), (1.5, "val_fraction is 1.5"), (0.1, "2 pairs cannot"))
    for fraction, message in cases:
        with pytest.raises(d2l.DataError, match=message):
            nmt.load_data_nmt_split(2, 5, val_fraction=fraction, path=path)
