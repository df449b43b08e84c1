"""Minibatch iterators: the book's toy example, properties over random shapes, parity with NumPy."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import d2lrnn as d2l
from d2lrnn import ops
from tests.conftest import token_dtype

PROPERTIES = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])


def as_numpy(batches):
    return [(ops.to_numpy(X), ops.to_numpy(Y)) for X, Y in batches]


def test_book_toy_random():
    # The book's toy corpus range(35), batch 2, 5 steps. The book prints one random draw of its own;
    # these batches are what NumPy's default_rng(0) draws here (pinned from this code on 2026-11-22):
    # offset 4, so subsequences start at 4, 9, ..., 29, served in the order 19 14 | 29 24 | 4 9.
    # What any draw must satisfy is tested by the properties below.
    batches = as_numpy(d2l.seq_data_iter_random(list(range(35)), 2, 5, rng=np.random.default_rng(0)))
    expected_X = [[[19, 20, 21, 22, 23], [14, 15, 16, 17, 18]],
                  [[29, 30, 31, 32, 33], [24, 25, 26, 27, 28]],
                  [[4, 5, 6, 7, 8], [9, 10, 11, 12, 13]]]
    expected_Y = [[[20, 21, 22, 23, 24], [15, 16, 17, 18, 19]],
                  [[30, 31, 32, 33, 34], [25, 26, 27, 28, 29]],
                  [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]]
    assert [X.tolist() for X, _ in batches] == expected_X
    assert [Y.tolist() for _, Y in batches] == expected_Y


def test_book_toy_sequential():
    # The book's toy example with default_rng(0)'s offset (4, pinned from this code on 2026-11-22): by
    # hand, rows 4..18 and 19..33 of range(35), read five tokens at a time.
    batches = as_numpy(d2l.seq_data_iter_sequential(list(range(35)), 2, 5, rng=np.random.default_rng(0)))
    expected_X = [[[4, 5, 6, 7, 8], [19, 20, 21, 22, 23]],
                  [[9, 10, 11, 12, 13], [24, 25, 26, 27, 28]],
                  [[14, 15, 16, 17, 18], [29, 30, 31, 32, 33]]]
    expected_Y = [[[5, 6, 7, 8, 9], [20, 21, 22, 23, 24]],
                  [[10, 11, 12, 13, 14], [25, 26, 27, 28, 29]],
                  [[15, 16, 17, 18, 19], [30, 31, 32, 33, 34]]]
    assert [X.tolist() for X, _ in batches] == expected_X
    assert [Y.tolist() for _, Y in batches] == expected_Y


def test_batches_are_integer_backend_tensors():
    X, Y = next(iter(d2l.seq_data_iter_random(list(range(35)), 2, 5)))
    assert ops.is_tensor(X) and ops.is_tensor(Y)
    assert tuple(ops.shape(X)) == (2, 5)
    assert ops.to_numpy(X).dtype == token_dtype() and ops.to_numpy(Y).dtype == token_dtype()


def test_shared_generator_when_no_rng():
    d2l.manual_seed(5)
    first = as_numpy(d2l.seq_data_iter_random(list(range(100)), 3, 4))
    d2l.manual_seed(5)
    assert np.array_equal(as_numpy(d2l.seq_data_iter_random(list(range(100)), 3, 4)), first)


shapes = st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(0, 120), st.integers(0, 2**31))


def loader(length, batch_size, num_steps, random, seed):
    return d2l.SeqDataLoader.from_tokens(np.arange(length), None, batch_size, num_steps, random, seed=seed)


@PROPERTIES
@given(shapes, st.booleans())
def test_labels_shift_and_positions_unique(shape, random):
    batch_size, num_steps, extra, seed = shape
    length = batch_size * num_steps + 1 + extra
    data = loader(length, batch_size, num_steps, random, seed)
    for _ in range(2):  # two epochs, two offsets
        batches = as_numpy(data)
        assert len(batches) == len(data) >= 1
        Xs = np.stack([X for X, _ in batches])
        Ys = np.stack([Y for _, Y in batches])
        assert Xs.shape == (len(data), batch_size, num_steps)
        # token value = position: labels are the next position, rows are contiguous runs
        assert np.array_equal(Ys, Xs + 1)
        assert np.array_equal(np.diff(Xs, axis=2), np.ones((len(data), batch_size, num_steps - 1)))
        assert len(np.unique(Xs)) == Xs.size
        assert 0 <= Xs.min() and Ys.max() < length


@PROPERTIES
@given(shapes)
def test_sequential_rows_continue(shape):
    batch_size, num_steps, extra, seed = shape
    data = loader(batch_size * num_steps + 1 + extra, batch_size, num_steps, False, seed)
    Xs = np.stack([X for X, _ in as_numpy(data)])
    offset = Xs[0, 0, 0]
    assert 0 <= offset <= num_steps - 1
    # batch i + 1 starts each row right after batch i ended it
    assert np.array_equal(Xs[1:, :, 0], Xs[:-1, :, -1] + 1)
    rows = Xs.transpose(1, 0, 2).reshape(batch_size, -1)
    assert np.array_equal(rows, rows[:, :1] + np.arange(rows.shape[1]))


@PROPERTIES
@given(shapes)
def test_random_subsequences_on_a_grid(shape):
    batch_size, num_steps, extra, seed = shape
    data = loader(batch_size * num_steps + 1 + extra, batch_size, num_steps, True, seed)
    starts = np.stack([X[:, 0] for X, _ in as_numpy(data)])
    offsets = starts % num_steps
    assert len(np.unique(offsets)) == 1 and offsets.flat[0] <= num_steps - 1


@PROPERTIES
@given(shapes, st.booleans())
def test_same_seed_same_batches_as_numpy(shape, random):
    batch_size, num_steps, extra, seed = shape
    length = batch_size * num_steps + 1 + extra
    tokens = np.random.default_rng(seed).integers(0, 30, length)
    here = as_numpy(d2l.SeqDataLoader.from_tokens(tokens, None, batch_size, num_steps, random, seed=seed))
    with d2l.use_backend("numpy"):
        reference = as_numpy(d2l.SeqDataLoader.from_tokens(tokens, None, batch_size, num_steps, random,
                                                           seed=seed))
    assert len(here) == len(reference)
    for (X, Y), (X_ref, Y_ref) in zip(here, reference):
        assert np.array_equal(X, X_ref) and np.array_equal(Y, Y_ref)


def test_time_machine_loader():
    data_iter, vocab = d2l.load_data_time_machine(32, 35)
    assert len(vocab) == 28 and data_iter.vocab is vocab and data_iter.num_tokens == 10000
    assert len(data_iter) == 8  # (10000 - 1 - 34) // 32 = 311 tokens a row, 8 steps of 35
    assert len(list(data_iter)) == 8
    full = d2l.SeqDataLoader(32, 35, True, -1, seed=0)
    # (170580 - 1 - 34) // 35 = 4872 subsequences: 152 batches of 32
    assert full.num_tokens == 170580 and len(full) == 152
    assert len(list(full)) == 152


def test_loader_epochs_differ_and_seed_repeats():
    a = d2l.SeqDataLoader(4, 10, False, 2000, seed=1)
    b = d2l.SeqDataLoader(4, 10, False, 2000, seed=1)
    epochs_a = [as_numpy(a) for _ in range(4)]
    epochs_b = [as_numpy(b) for _ in range(4)]
    assert np.array_equal(epochs_a, epochs_b)
    firsts = {int(epoch[0][0][0, 0] != epochs_a[0][0][0][0, 0]) for epoch in epochs_a[1:]}
    assert 1 in firsts  # a new offset in some later epoch


def test_load_data_lm():
    train_iter, val_iter, vocab = d2l.load_data_lm(batch_size=32, num_steps=35, seed=0)
    assert len(vocab) == 28
    assert (train_iter.num_tokens, val_iter.num_tokens) == (153522, 17058)
    corpus, _ = d2l.load_corpus("timemachine")
    first, again = as_numpy(val_iter), as_numpy(val_iter)
    # 16 rows whatever the batch size: 17057 // 16 = 1066 tokens a row, 30 steps of 35 and one of 16
    assert val_iter.batch_size == d2l.VAL_STREAMS == 16
    assert len(first) == len(val_iter) == 31
    assert all(np.array_equal(a, b) for pair, twin in zip(first, again) for a, b in zip(pair, twin))
    assert [X.shape for X, _ in first[-2:]] == [(16, 35), (16, 16)]
    assert np.array_equal(first[0][0][0], corpus[153522:153522 + 35])
    assert np.array_equal(first[1][0][0], corpus[153522 + 35:153522 + 70])
    assert np.array_equal(first[-1][0][3], corpus[153522 + 3 * 1066 + 1050:153522 + 4 * 1066])
    assert np.array_equal(first[-1][1][15], corpus[153522 + 15 * 1066 + 1051:153522 + 16 * 1066 + 1])


def _scored(val_iter):
    """The validation targets as one row of text per stream."""
    return np.concatenate([Y for _, Y in as_numpy(val_iter)], axis=1)


def test_val_tokens_independent_of_batch_size_and_num_steps():
    """The validation perplexity of a model is the same whatever batch size and num_steps it trained
    with: the validation loader scores the same targets in the same rows."""
    scored = {(batch, steps): _scored(d2l.load_data_lm(batch_size=batch, num_steps=steps, max_tokens=20000,
                                                       seed=0)[1])
              for batch, steps in [(32, 35), (4, 35), (8, 64), (16, 124)]}
    reference = scored[(32, 35)]
    assert reference.shape == (16, 124)  # (2000 - 1) // 16; 124 = 3 * 35 + 19
    for value in scored.values():
        assert np.array_equal(value, reference)
    assert len(d2l.load_data_lm(batch_size=4, num_steps=124, max_tokens=20000)[1]) == 1  # no empty tail


def test_val_streams():
    _, val_iter, _ = d2l.load_data_lm(batch_size=4, num_steps=35, max_tokens=20000, val_streams=1)
    (row,) = _scored(val_iter)
    corpus, _ = d2l.load_corpus("timemachine", max_tokens=20000)
    assert np.array_equal(row, corpus[18001:20000])  # one stream: every target of the split, in order
    with pytest.raises(d2l.DataError, match=r"^val_streams is 0: use a positive integer$"):
        d2l.load_data_lm(val_streams=0)
    with pytest.raises(d2l.DataError, match="whole=True reads the rows in order from token 0"):
        d2l.SeqDataLoader.from_tokens(list(range(100)), None, 2, 5, True, whole=True)


def test_load_data_lm_shrinks_val_batch():
    train_iter, val_iter, _ = d2l.load_data_lm(batch_size=8, num_steps=35, max_tokens=1000)
    assert (train_iter.num_tokens, val_iter.num_tokens) == (900, 100)
    assert val_iter.batch_size == 2 and train_iter.batch_size == 8  # (100 - 1) // 35 rows
    # 49 tokens a row: one step of 35, then the 14 left
    assert [X.shape for X, _ in as_numpy(val_iter)] == [(2, 35), (2, 14)] and len(val_iter) == 2


def test_load_data_lm_without_val():
    train_iter, val_iter, _ = d2l.load_data_lm(batch_size=4, num_steps=5, max_tokens=500, val_fraction=0)
    assert val_iter is None and train_iter.num_tokens == 500


def test_load_data_lm_words():
    train_iter, val_iter, vocab = d2l.load_data_lm(token="word", batch_size=8, num_steps=10)
    assert len(vocab) == 4580 and train_iter.num_tokens + val_iter.num_tokens == 32775


def test_val_split_too_short():
    with pytest.raises(d2l.DataError) as err:
        d2l.load_data_lm(batch_size=2, num_steps=35, max_tokens=300)
    assert str(err.value) == ("the validation split of corpus 'timemachine' has 30 tokens, fewer than "
                              "num_steps + 1 = 36: use a smaller --num-steps or a larger --val-fraction")


def test_corpus_too_short():
    with pytest.raises(d2l.DataError) as err:
        d2l.SeqDataLoader(2, 35, False, 40)
    assert str(err.value) == ("corpus 'timemachine' has 40 tokens, fewer than batch_size * num_steps + 1 "
                              "= 71: use a smaller --batch-size or --num-steps, or a longer text")
    with pytest.raises(d2l.DataError, match="corpus has 10 tokens, fewer than"):
        d2l.seq_data_iter_sequential(list(range(10)), 2, 5)


def test_exactly_enough_tokens():
    batches = as_numpy(d2l.seq_data_iter_random(list(range(11)), 2, 5))
    assert len(batches) == 1 and sorted(batches[0][0][:, 0].tolist()) == [0, 5]


@pytest.mark.parametrize("batch_size, num_steps, what", [
    (0, 5, "batch_size is 0: use a positive integer (--batch-size)"),
    (2, 0, "num_steps is 0: use a positive integer (--num-steps)"),
    (-1, 5, "batch_size is -1"),
    (2.5, 5, "batch_size is 2.5"),
])
def test_bad_batch_settings(batch_size, num_steps, what):
    for make in (lambda: d2l.seq_data_iter_random(list(range(100)), batch_size, num_steps),
                 lambda: d2l.SeqDataLoader(batch_size, num_steps, True, 1000),
                 lambda: d2l.load_data_lm(batch_size=batch_size, num_steps=num_steps)):
        with pytest.raises(d2l.DataError) as err:
            make()
        assert str(err.value).startswith(what) and "\n" not in str(err.value)


@pytest.mark.parametrize("max_tokens", [0, -5, 2.5, True])
def test_max_tokens_other_than_minus_one_or_positive_is_refused(max_tokens):
    # 0 and -5 used to mean the whole corpus, silently
    with pytest.raises(d2l.DataError, match=f"max_tokens is {max_tokens!r}: use -1 \\(the whole corpus\\)"):
        d2l.load_data_time_machine(2, 5, max_tokens=max_tokens)


@pytest.mark.parametrize("corpus", [None, 3, "", " "])
def test_a_corpus_that_is_not_a_name_or_path_is_refused(corpus):
    with pytest.raises(d2l.DataError, match=f"corpus must be one of timemachine.*got {corpus!r}"):
        d2l.load_data_lm(corpus=corpus)


def test_a_negative_loader_seed_is_refused():
    with pytest.raises(d2l.ArgumentError, match="seed must be at least 0, got -1"):
        d2l.load_data_lm(max_tokens=2000, seed=-1)


def test_the_loader_generator_state_resumes_the_epoch_order():
    loader = d2l.SeqDataLoader.from_tokens(np.arange(400), None, 4, 5, True, seed=1)
    next(iter(loader))
    state = loader.rng_state()
    expected = [d2l.to_numpy(X).tolist() for X, _ in loader]
    other = d2l.SeqDataLoader.from_tokens(np.arange(400), None, 4, 5, True, seed=1)
    other.set_rng_state(state)
    assert [d2l.to_numpy(X).tolist() for X, _ in other] == expected


@pytest.mark.parametrize("iterate", [d2l.seq_data_iter_random, d2l.seq_data_iter_sequential])
def test_a_given_generator_decides_the_batches_not_the_shared_one(iterate):
    d2l.manual_seed(0)  # the shared generator, in the state default_rng(0) starts in
    mine = as_numpy(iterate(list(range(60)), 2, 5, rng=np.random.default_rng(5)))
    d2l.manual_seed(123)
    again = as_numpy(iterate(list(range(60)), 2, 5, rng=np.random.default_rng(5)))
    other = as_numpy(iterate(list(range(60)), 2, 5, rng=np.random.default_rng(0)))
    assert np.array_equal(mine, again) and not np.array_equal(mine, other)


def test_the_loaders_serve_what_their_sampling_says():
    random_lm = d2l.load_data_lm(batch_size=4, num_steps=5, use_random_iter=True, max_tokens=2000, seed=0)[0]
    for loader in (random_lm, d2l.load_data_time_machine(4, 5, use_random_iter=True, max_tokens=2000)[0]):
        assert loader.use_random_iter and "random" in repr(loader)
        (X1, Y1), (X2, _) = as_numpy(loader)[:2]
        # random subsequences: the rows of the next minibatch do not go on with the text of this one
        assert not np.array_equal(X2[:, 0], Y1[:, -1])
    sequential = d2l.load_data_lm(batch_size=4, num_steps=5, max_tokens=2000, seed=0)[0]
    assert not sequential.use_random_iter
    (X1, Y1), (X2, _) = as_numpy(sequential)[:2]
    np.testing.assert_array_equal(X2[:, 0], Y1[:, -1])  # each row goes on with the next token


def test_a_loader_knows_its_vocabulary_name_and_size():
    train_iter, val_iter, vocab = d2l.load_data_lm(batch_size=4, num_steps=5, max_tokens=2000, seed=0)
    assert train_iter.vocab is vocab and val_iter.vocab is vocab
    assert repr(train_iter) == ("SeqDataLoader(1800 tokens, batch_size=4, num_steps=5, sequential, "
                                f"{len(train_iter)} batches per epoch)")
    assert repr(d2l.SeqDataLoader.from_tokens(np.arange(100), vocab, 2, 5, True)) == (
        "SeqDataLoader(100 tokens, batch_size=2, num_steps=5, random, 9 batches per epoch)")
    with pytest.raises(d2l.DataError, match="^token list has 5 tokens, fewer than"):
        d2l.SeqDataLoader.from_tokens(np.arange(5), vocab, 2, 5, True)
    with pytest.raises(d2l.DataError, match="^the training split of corpus 'timemachine' has 27 tokens"):
        d2l.load_data_lm(batch_size=4, num_steps=10, max_tokens=30)


@pytest.mark.parametrize("use_random_iter", [True, False])
@pytest.mark.parametrize("n", [100, 101, 137])
def test_an_epoch_has_exactly_len_minibatches_for_any_offset(use_random_iter, n):
    for seed in range(8):  # offsets from 0 to num_steps - 1
        loader = d2l.SeqDataLoader.from_tokens(np.arange(n), None, 3, 5, use_random_iter, seed=seed)
        assert len(as_numpy(loader)) == len(loader)
    fixed = d2l.SeqDataLoader.from_tokens(np.arange(n), None, 3, 5, use_random_iter, random_offset=False)
    # no offset: every token but the last can start a row
    expected = ((n - 1) // 5) // 3 if use_random_iter else ((n - 1) // 3) // 5
    assert len(fixed) == len(as_numpy(fixed)) == expected


def test_a_loader_without_its_own_generator_has_no_state_to_save():
    loader = d2l.SeqDataLoader.from_tokens(np.arange(100), None, 2, 5, True)
    assert loader.rng_state() is None
    loader.set_rng_state({"ignored": True})  # nothing to restore: the shared generator is the state
    assert len(as_numpy(loader)) == len(loader)


def test_the_validation_split_just_long_enough_and_its_rows():
    # 60 tokens, 10% held out: 6 validation tokens = num_steps + 1 for num_steps 5: one row, one batch
    train_iter, val_iter, _ = d2l.load_data_lm(batch_size=4, num_steps=5, max_tokens=60, seed=0)
    assert val_iter.num_tokens == 6 and val_iter.batch_size == 1 and len(as_numpy(val_iter)) == 1
    # 1000 tokens: 100 held out, (100 - 1) // 10 = 9 rows (fewer than the batch size 32)
    _, val_iter, _ = d2l.load_data_lm(batch_size=32, num_steps=10, max_tokens=1000)
    assert val_iter.batch_size == 9 and not val_iter.use_random_iter and not val_iter.random_offset


def test_the_loaders_defaults_are_the_books():
    # load_data_time_machine(batch_size, num_steps): sequential, the first 10,000 characters
    data_iter, _ = d2l.load_data_time_machine(2, 5)
    assert not data_iter.use_random_iter and data_iter.num_tokens == 10000
    # load_data_lm(): The Time Machine, 32 x 35, sequential, all of it, the last tenth held out
    train_iter, val_iter, _ = d2l.load_data_lm()
    assert (train_iter.batch_size, train_iter.num_steps, train_iter.use_random_iter) == (32, 35, False)
    assert (train_iter.num_tokens, val_iter.num_tokens) == (153522, 17058)
