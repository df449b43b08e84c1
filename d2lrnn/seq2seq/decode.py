"""Decoding a trained encoder-decoder: greedy search and beam search, batched over sentences.

Both start from the encoder's state and feed the decoder ``<bos>``, then their own previous
choice, for at most ``max_len`` tokens; a sentence ends when ``<eos>`` is chosen (it is not part of
the translation). The network runs once per step for the whole batch; choosing the tokens is
NumPy work on the step's log-probabilities.

- Greedy search takes the most probable token at every step.
- Beam search keeps, for each sentence, the ``beam_size`` most probable partial translations. At
  each step it scores every continuation of every kept one, log P(y_1..y_t') = log P(y_1..y_t'-1)
  + log P(y_t' | ...), and keeps the best ``width`` of them; one that ends in ``<eos>`` is finished
  and the width shrinks by one, so the search ends when ``beam_size`` translations are finished
  (or at ``max_len``, where the unfinished ones count as finished). The translation is the finished
  one with the highest length-normalised score

      score = log P(y_1..y_L) / L^alpha        (L counts the tokens and the <eos>, alpha = 0.75)

  so that long translations, whose log-probability has more negative terms, are not ruled out.
  With ``beam_size`` 1 this is exactly greedy search (ties go to the lower token index in both).
"""

import weakref

import numpy as np

from .. import checks, ops
from ..backends import checked_index, checked_indices, checked_lengths, checked_tensor
from ..data.translation import build_array_nmt_numpy, preprocess_nmt
from ..errors import ArgumentError
from ..keys import tagged
from ..training.loop import model_device
from .model import EncoderDecoder

#: The default exponent of the length normalisation.
ALPHA = 0.75
#: Sentences decoded together (beam search runs beam_size rows per sentence), as memory allows.
BATCH_SIZE = 128
#: Bytes the choice of tokens may take per step: each row of the decoder (a sentence, or a beam of one)
#: holds about five arrays of the target vocabulary's size in float64 (logits, log-probabilities, scores,
#: the ranking), :data:`BYTES_PER_SCORE` bytes per token. Sentences per batch are cut to fit, and a beam
#: too wide for one sentence to fit is refused before any work.
DECODE_BUDGET = 256 * 2**20
BYTES_PER_SCORE = 40
#: Each model's compiled search steps (:class:`_Steps`); an entry goes with its model.
_SEARCH_STEPS = weakref.WeakKeyDictionary()


def _log_softmax(logits):
    """Row-wise log-softmax in float64: distinct float32 logits stay distinct, so the order is the
    argmax's."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


class _Steps:
    """A model's encoder and one decoder step as the searches call them: ``encode(params, X, X_valid_len)``
    and ``decode(params, dec_X, state, parents)`` (each row's state taken from row ``parents`` first, where
    given). Compiled for a few calls (``ops.compile(..., calls="few")``) where the model is an
    :class:`EncoderDecoder` (whose parts training compiles too) and not the reader's own framework module;
    other models' code may not trace. On JAX one program per input shape instead of every small operation
    compiled on its own (the first greedy search of 300 sentences took 5.8 s eagerly, nearly all of it
    compiling, and 2.1 s compiled). Compiled steps are kept for the model's lifetime
    (:data:`_SEARCH_STEPS`)."""

    def __init__(self, model, compiled):
        """``model``: a function that returns the model (a weak reference, for compiled steps)."""
        def encode(params, X, X_valid_len):
            return model().encode(params, X, X_valid_len)

        def decode(params, dec_X, state, parents):
            if parents is not None:  # beam search: each row continues from its parent's state
                state = tuple(ops.take(s, parents) for s in state)
            return model().decode(params, dec_X, state)

        key = model().compile_key() if compiled else None  # models of one structure share their programs
        self.encode, self.decode = (ops.compile(encode, calls="few", key=tagged("encode", key)),
                                    ops.compile(decode, calls="few", key=tagged("decode", key))) \
            if compiled else (encode, decode)

    @classmethod
    def of(cls, net):
        if not (isinstance(net, EncoderDecoder) and getattr(net, "kind", None) != "module"):
            return cls(lambda: net, compiled=False)
        steps = _SEARCH_STEPS.get(net)
        if steps is None:  # a weak reference: the steps must not keep the model alive
            steps = _SEARCH_STEPS[net] = cls(weakref.ref(net), compiled=True)
        return steps


def _step_logits(steps, params, tokens, state, device, parents=None):
    """The decoder's logits (rows, vocab) for one token per row, and the new state (each row's from the
    row ``parents`` names first, where given)."""
    dec_X = ops.tensor(np.asarray(tokens, np.int64).reshape(-1, 1), device=device)
    if parents is not None:
        parents = ops.tensor(parents, device=device)
    Y, state = steps.decode(params, dec_X, state, parents)
    return ops.to_numpy(Y)[:, 0, :], state


def greedy_search(net, X, X_valid_len, bos, eos, max_len, params=None, device=None):
    """The token indices (lists, ``<eos>`` left out) that greedy search chooses for each source row of
    ``X`` (batch, num_steps, a tensor or NumPy array of indices)."""
    params = net.params if params is None else params
    device = model_device(net, device)  # default: where the model was built
    X, X_valid_len, bos, eos = _checked(net, X, X_valid_len, bos, eos, device)
    steps = _Steps.of(net)
    state = steps.encode(params, X, X_valid_len)
    batch = ops.shape(X)[0]
    outputs, done, tokens = [[] for _ in range(batch)], np.zeros(batch, bool), np.full(batch, bos)
    for _ in range(max_len):
        logits, state = _step_logits(steps, params, tokens, state, device)
        tokens = logits.argmax(axis=1)
        for i in np.flatnonzero(~done):
            if tokens[i] == eos:
                done[i] = True
            else:
                outputs[i].append(int(tokens[i]))
        if done.all():
            break
    return outputs


def beam_search(net, X, X_valid_len, bos, eos, max_len, beam_size=4, alpha=ALPHA, params=None, device=None):
    """The token indices (lists, ``<eos>`` left out) that beam search with ``beam_size`` beams chooses for
    each source row of ``X``; see the module docstring for the scores."""
    beam_size = check_beam(beam_size)
    if getattr(net, "kind", None) == "module":
        raise ArgumentError("beam search reorders the decoder's state, whose layout your own framework model "
                            "decides: decode it greedily (beam_size=1), or build it with d2l.make_seq2seq")
    params = net.params if params is None else params
    device = model_device(net, device)  # default: where the model was built
    X, X_valid_len, bos, eos = _checked(net, X, X_valid_len, bos, eos, device)
    batch, k = ops.shape(X)[0], beam_size
    steps = _Steps.of(net)
    state = steps.encode(params, X, X_valid_len)
    parents = np.repeat(np.arange(batch), k)  # sentence i -> rows i*k .. i*k+k-1
    scores = np.full((batch, k), -np.inf)
    scores[:, 0] = 0.0  # one live hypothesis, the empty one, per sentence
    seqs = [[[] for _ in range(k)] for _ in range(batch)]
    width = np.full(batch, k)
    finished = [[] for _ in range(batch)]  # (log-probability, tokens)
    tokens = np.full(batch * k, bos)
    for _ in range(max_len):
        logits, state = _step_logits(steps, params, tokens, state, device, parents)
        total = scores[:, :, None] + _log_softmax(logits).reshape(batch, k, -1)  # (batch, beam, vocab)
        parents, tokens = np.zeros(batch * k, np.int64), np.full(batch * k, bos)
        new_scores = np.full((batch, k), -np.inf)
        new_seqs = [[[] for _ in range(k)] for _ in range(batch)]
        for i in np.flatnonzero(width > 0):
            flat = total[i].reshape(-1)
            best = _top(flat, width[i])
            live = 0
            for index in best:
                beam, token = divmod(int(index), total.shape[2])
                if flat[index] == -np.inf:  # fewer candidates than beams (a vocabulary smaller than k)
                    width[i] -= 1
                    continue
                if token == eos:
                    finished[i].append((flat[index], seqs[i][beam]))
                    width[i] -= 1
                    continue
                new_scores[i, live] = flat[index]
                new_seqs[i][live] = seqs[i][beam] + [token]
                parents[i * k + live], tokens[i * k + live] = i * k + beam, token
                live += 1
        scores, seqs = new_scores, new_seqs
        if not width.any():
            break
    for i in np.flatnonzero(width > 0):  # max_len reached: the live hypotheses end here
        finished[i].extend((scores[i, j], seqs[i][j]) for j in range(width[i]))
    return [_best(candidates, alpha, eos_counted=True) for candidates in finished]


def _top(scores, k):
    """The indices of the ``k`` highest of ``scores`` (a flat array), highest first, the lower index first
    among equal scores: ``np.argsort(-scores, kind="stable")[:k]``, in linear time (``np.partition`` finds
    the k-th; only the scores up to it are sorted)."""
    key = -scores
    if k >= len(key):
        return np.argsort(key, kind="stable")
    kth = np.partition(key, k - 1)[k - 1]
    if np.isnan(kth):  # fewer than k numbers: NaN sorts last, as argsort puts it
        return np.argsort(key, kind="stable")[:k]
    candidates = np.flatnonzero(key <= kth)
    return candidates[np.argsort(key[candidates], kind="stable")][:k]


def _best(candidates, alpha, eos_counted):
    """The tokens of the candidate with the highest log P / L^alpha (the first of equal ones)."""
    def score(candidate):
        log_p, tokens = candidate
        return log_p / max(len(tokens) + eos_counted, 1) ** alpha  # alpha <= MAX_ALPHA: no overflow

    return max(candidates, key=score)[1]


def check_beam(beam_size):
    """``beam_size`` as an int from 1 to :data:`d2lrnn.checks.MAX_BEAM`, or one ArgumentError line."""
    if isinstance(beam_size, bool) or not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
        raise ArgumentError(f"beam size is {beam_size!r}: use a whole number of 1 or more (1: greedy search, "
                            "e.g. 4) (--beam)")
    return checks.at_most("beam size", int(beam_size), checks.MAX_BEAM, " (e.g. 4) (--beam)")


def sentences_per_batch(beam_size, vocab_size, batch_size=BATCH_SIZE):
    """How many sentences to decode at once so that choosing the tokens stays within
    :data:`DECODE_BUDGET`; one ArgumentError line if not even one sentence's beams fit."""
    rows = DECODE_BUDGET // (BYTES_PER_SCORE * vocab_size)
    if beam_size > rows:
        raise ArgumentError(f"beam search with {beam_size} beams over a target vocabulary of {vocab_size:,} "
                            f"tokens needs about {beam_size * vocab_size * BYTES_PER_SCORE / 2**30:.1f} GB a "
                            f"step: use a beam of at most {max(rows, 1)} (--beam)")
    return max(1, min(batch_size, rows // beam_size))


def _checked(net, X, X_valid_len, bos, eos, device):
    """The source indices and valid lengths as tensors, and the ``<bos>`` and ``<eos>`` ids, checked against
    the model's vocabularies (where it says their sizes)."""
    src_size = getattr(getattr(net, "encoder", None), "vocab_size", None)
    tgt_size = getattr(getattr(net, "decoder", None), "vocab_size", None)
    if src_size is not None:
        checked_indices("X", X, src_size, "the source vocabulary")
    else:
        checked_tensor("X", X)
    shape = np.shape(X) if isinstance(X, np.ndarray) else tuple(ops.shape(X))
    checked_lengths("X_valid_len", X_valid_len, shape[1] if len(shape) == 2 else None)
    if tgt_size is not None:
        bos, eos = (checked_index(name, value, tgt_size) for name, value in (("bos", bos), ("eos", eos)))
    if isinstance(X, np.ndarray):
        X = ops.tensor(X, device=device)
    if isinstance(X_valid_len, np.ndarray):
        X_valid_len = ops.tensor(X_valid_len, device=device)
    return X, X_valid_len, bos, eos


def source_arrays(sentences, src_vocab, num_steps):
    """NumPy ``(X, X_valid_len)`` for raw source sentences: preprocessed as the training pairs were
    (lower case, punctuation split off), words the vocabulary lacks read as ``<unk>``."""
    token_lists = []
    for sentence in sentences:
        if not isinstance(sentence, str):
            raise ArgumentError(f"a sentence to translate must be a string, got {type(sentence).__name__}")
        tokens = preprocess_nmt(sentence).split()
        if not tokens:
            raise ArgumentError(f"the sentence to translate is empty ({sentence!r}): give at least one word, "
                                "e.g. 'go .'")
        token_lists.append(tokens)
    return build_array_nmt_numpy(token_lists, src_vocab, num_steps)


def translate_arrays(net, X, X_valid_len, tgt_vocab, max_len, beam_size=1, alpha=ALPHA,
                     batch_size=BATCH_SIZE, params=None, device=None):
    """Target token lists for source index arrays (NumPy), decoded ``batch_size`` sentences at a time."""
    beam_size = check_beam(beam_size)
    max_len = checks.positive_int("max_len", max_len, " (the longest translation in tokens, e.g. 10)")
    checks.at_most("max_len", max_len, checks.MAX_NUM_STEPS)
    alpha = checks.number("alpha", alpha, 0, hint=" (the length-normalisation exponent, e.g. 0.75)")
    checks.at_most("alpha", alpha, checks.MAX_ALPHA, " (the length-normalisation exponent, e.g. 0.75)")
    batch_size = sentences_per_batch(beam_size, len(tgt_vocab), batch_size)
    bos, eos = tgt_vocab["<bos>"], tgt_vocab["<eos>"]
    X, X_valid_len = np.asarray(X), np.asarray(X_valid_len)
    out = []
    for start in range(0, len(X), batch_size):
        chunk = (X[start:start + batch_size], X_valid_len[start:start + batch_size])
        if beam_size == 1:
            ids = greedy_search(net, *chunk, bos, eos, max_len, params, device)
        else:
            ids = beam_search(net, *chunk, bos, eos, max_len, beam_size, alpha, params, device)
        out.extend(tgt_vocab.to_tokens(seq) for seq in ids)
    return out


def translate(net, sentences, src_vocab, tgt_vocab, num_steps, beam_size=1, alpha=ALPHA, max_len=None,
              device=None):
    """Translations (strings of space-separated tokens) of ``sentences``, decoded in batches: greedy, or
    beam search with ``beam_size`` beams. ``max_len`` (default ``num_steps``) bounds their length."""
    if isinstance(sentences, str):
        raise ArgumentError("translate takes a list of sentences: pass [sentence], or use predict_seq2seq")
    _check_vocabs(net, src_vocab, tgt_vocab)
    X, X_valid_len = source_arrays(sentences, src_vocab, num_steps)
    tokens = translate_arrays(net, X, X_valid_len, tgt_vocab, max_len or num_steps, beam_size, alpha,
                              device=device)
    return [" ".join(t) for t in tokens]


def predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps, device=None,
                    save_attention_weights=False, beam_size=1, alpha=ALPHA):
    """The book's ``predict_seq2seq``: ``(translation, attention_weights)`` of one sentence, greedy by
    default (``beam_size`` > 1: beam search). This model has no attention, so the weights are ``[]``."""
    translations = translate(net, [src_sentence], src_vocab, tgt_vocab, num_steps, beam_size, alpha,
                             device=device)
    return translations[0], []


def _check_vocabs(net, src_vocab, tgt_vocab):
    for name, vocab, part in (("source", src_vocab, net.encoder), ("target", tgt_vocab, net.decoder)):
        size = getattr(part, "vocab_size", None)
        if size is not None and len(vocab) != size:
            raise ArgumentError(f"the {name} vocabulary has {len(vocab)} tokens but the model {size}: "
                                "pass the vocabularies the model was trained with")
