"""The English 1.0 edition's data: ``Vocab``, ``TimeMachine`` and ``MTFraEng`` over d2lrnn's bundled corpora.

Nothing downloads: ``_download`` reads the text shipped in :mod:`d2lrnn.data` (The Time Machine, and the
English-French pairs, 18,066 of them, fewer than the book's ``fra.txt``; ``$D2LRNN_FRA_TXT`` names the full
file). The 1.0 edition's vocabulary orders its tokens alphabetically (``<unk>`` and the reserved tokens
among them), where the 2.x edition orders them by frequency: :func:`Vocab` builds d2lrnn's
:class:`~d2lrnn.data.Vocab` in that order.
"""

import os
import pathlib
import re

import numpy as np

from ... import ops
from ...data import corpus, translation
from ...data import vocab as vocab_module
from ...errors import DataError
from ...training.atomic import atomic_write
from .base import DataModule


class Vocab(vocab_module.Vocab):
    """The 1.0 edition's vocabulary of ``tokens`` (a list, or a list of lists): ``<unk>``, the reserved
    tokens and every token seen at least ``min_freq`` times, sorted, and indexed in that order (so
    ``<unk>`` is not always 0: :attr:`unk` says where it is)."""

    def __init__(self, tokens=(), min_freq=0, reserved_tokens=()):
        counter = vocab_module.count_corpus(list(tokens))
        self._token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        kept = (token for token, freq in self._token_freqs if freq >= min_freq)
        self.idx_to_token = sorted({vocab_module.UNK, *reserved_tokens, *kept})
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __getitem__(self, tokens):
        """The index of a token (:attr:`unk` if unknown), or a list of indices for a list of tokens."""
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def to_tokens(self, indices):
        """The token of an index, or the tokens of a list, array or tensor of indices."""
        if ops.is_tensor(indices):  # (MXNet's book mode keeps indices as floats)
            indices = ops.to_numpy(indices).astype(np.int64)
        return super().to_tokens(indices.tolist() if isinstance(indices, np.ndarray) else indices)

    @property
    def unk(self):
        """The index of ``<unk>``."""
        return self.token_to_idx[vocab_module.UNK]


class TimeMachine(DataModule):
    """The Time Machine as characters: windows of ``num_steps`` characters (``X``) and the next characters
    (``Y``), the first ``num_train`` windows for training and the next ``num_val`` for validation."""

    def __init__(self, batch_size, num_steps, num_train=10000, num_val=5000):
        super().__init__()
        self.save_hyperparameters()
        indices, self.vocab = self.build(self._download())
        corpus_array = np.asarray(indices, dtype=np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(corpus_array, num_steps + 1)
        array = ops.from_numpy(np.ascontiguousarray(windows))
        self.X, self.Y = array[:, :-1], array[:, 1:]

    def _download(self):
        """The book's text, from the copy bundled with d2lrnn."""
        return corpus.read_text("timemachine")

    def _preprocess(self, text):
        """Every run of non-letters a space, lower case."""
        return re.sub("[^A-Za-z]+", " ", text).lower()

    def _tokenize(self, text):
        """Character tokens."""
        return list(text)

    def build(self, raw_text, vocab=None):
        """``(corpus, vocab)``: the text's token indices, and its vocabulary (``vocab`` if given)."""
        tokens = self._tokenize(self._preprocess(raw_text))
        if vocab is None:
            vocab = Vocab(tokens)
        return [vocab[token] for token in tokens], vocab

    def get_dataloader(self, train):
        idx = slice(0, self.num_train) if train else slice(self.num_train, self.num_train + self.num_val)
        return self.get_tensorloader([self.X, self.Y], train, idx)


class MTFraEng(DataModule):
    """English-French pairs as arrays ``(src, tgt_input, src_valid_len, tgt_label)``: sentences ended by
    ``<eos>``, cut or padded to ``num_steps`` words, the target also started by ``<bos>``; the first
    ``num_train`` pairs train, the next ``num_val`` validate; words seen once read as ``<unk>``."""

    def __init__(self, batch_size, num_steps=9, num_train=512, num_val=128):
        super().__init__()
        self.save_hyperparameters()
        self.arrays, self.src_vocab, self.tgt_vocab = self._build_arrays(self._download())

    def _download(self):
        """The pairs bundled with d2lrnn (or the file ``$D2LRNN_FRA_TXT`` names)."""
        return translation.read_data_nmt()

    def _preprocess(self, text):
        """Lower case, non-breaking spaces as spaces, a space before , . ! ? where none is."""
        return translation.preprocess_nmt(text)

    def _tokenize(self, text, max_examples=None):
        """``(src, tgt)`` word lists, each sentence ended by ``<eos>``, of the first pairs (all if None)."""
        src, tgt = [], []
        for i, line in enumerate(text.split("\n")):
            if max_examples and i > max_examples:
                break
            parts = line.split("\t")
            if len(parts) == 2:
                src.append([t for t in f"{parts[0]} <eos>".split(" ") if t])
                tgt.append([t for t in f"{parts[1]} <eos>".split(" ") if t])
        return src, tgt

    def _build_arrays(self, raw_text, src_vocab=None, tgt_vocab=None):
        def build_array(sentences, vocab, is_tgt=False):
            sentences = [translation.truncate_pad(s, self.num_steps, "<pad>") for s in sentences]
            if is_tgt:
                sentences = [["<bos>"] + s for s in sentences]
            if vocab is None:
                vocab = Vocab(sentences, min_freq=2)
            array = np.array([vocab[s] for s in sentences], dtype=np.int64)
            valid_len = (array != vocab["<pad>"]).sum(axis=1).astype(np.int32)
            return ops.from_numpy(array), vocab, ops.from_numpy(valid_len)

        src, tgt = self._tokenize(self._preprocess(raw_text), self.num_train + self.num_val)
        src_array, src_vocab, src_valid_len = build_array(src, src_vocab)
        tgt_array, tgt_vocab, _ = build_array(tgt, tgt_vocab, True)
        return (src_array, tgt_array[:, :-1], src_valid_len, tgt_array[:, 1:]), src_vocab, tgt_vocab

    def get_dataloader(self, train):
        idx = slice(0, self.num_train) if train else slice(self.num_train, None)
        return self.get_tensorloader(self.arrays, train, idx)

    def build(self, src_sentences, tgt_sentences):
        """The arrays of the given sentence pairs, in the data's vocabularies."""
        raw_text = "\n".join(src + "\t" + tgt for src, tgt in zip(src_sentences, tgt_sentences))
        arrays, _, _ = self._build_arrays(raw_text, self.src_vocab, self.tgt_vocab)
        return arrays


#: The files of the book's data server that d2lrnn bundles, by the name its URLs end with.
BUNDLED = {"timemachine.txt": lambda: corpus.corpus_path("timemachine"),
           "fra-eng.zip": translation.pairs_path}


def _bundled(url):
    name = str(url).rstrip("/").rsplit("/", 1)[-1]
    if name not in BUNDLED:
        raise DataError(f"d2lrnn downloads nothing and bundles no file {name!r} (it bundles "
                        f"{' and '.join(BUNDLED)}): open a file of your own instead")
    return name


def download(url, folder="../data", sha1_hash=None):
    """The 1.0 edition's ``download(url, folder, sha1_hash)``, served from d2lrnn's bundled files: the
    bundled ``timemachine.txt`` itself; for ``fra-eng.zip``, the name of the archive in ``folder``, which
    :func:`extract` unpacks (from the bundled pairs). Nothing is fetched."""
    name = _bundled(url)
    if name == "timemachine.txt":
        return str(BUNDLED[name]())
    return os.path.join(folder, name)


def extract(filename, folder=None):
    """The 1.0 edition's ``extract``: for ``fra-eng.zip``, ``fra-eng/fra.txt`` written next to it (or in
    ``folder``) from the pairs bundled with d2lrnn, as unpacking the book's archive gives it."""
    if _bundled(filename) != "fra-eng.zip":
        return
    target = pathlib.Path(folder or os.path.dirname(filename)) / "fra-eng" / "fra.txt"
    text = translation.read_data_nmt()
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, lambda f: f.write(text), mode="w", encoding="utf-8")
