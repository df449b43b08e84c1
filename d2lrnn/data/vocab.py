"""The vocabulary: a two-way mapping between tokens and integer indices."""

import collections
import itertools

import numpy as np

from ..errors import ArgumentError, DataError

UNK = "<unk>"


def count_corpus(tokens):
    """Count tokens, given as a flat list or as a list of token lists (one per line)."""
    if len(tokens) == 0 or isinstance(tokens[0], list):
        tokens = itertools.chain.from_iterable(tokens)
    return collections.Counter(tokens)


class Vocab:
    """Indices for tokens: ``<unk>`` is 0, then the reserved tokens, then the rest by frequency.

    Tokens of equal frequency keep the order in which they first appear in the text (the
    order of the counter), so the mapping is deterministic. Tokens seen fewer than
    ``min_freq`` times are left out and map to ``<unk>``, as does any unknown token.
    """

    def __init__(self, tokens=None, min_freq=0, reserved_tokens=None):
        self._build(count_corpus(tokens if tokens is not None else []), min_freq, reserved_tokens)

    @classmethod
    def from_counter(cls, counter, min_freq=0, reserved_tokens=None):
        """A vocabulary from token counts (a ``Counter`` whose order is first appearance)."""
        vocab = cls.__new__(cls)
        vocab._build(counter, min_freq, reserved_tokens)
        return vocab

    def _build(self, counter, min_freq, reserved_tokens):
        reserved = [t for t in dict.fromkeys(reserved_tokens or []) if t != UNK]
        # sorted() is stable: ties keep the counter's (first-appearance) order.
        self._token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token = [UNK] + reserved
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.token_to_idx[token] = len(self.idx_to_token)
                self.idx_to_token.append(token)
        if self._token_freqs and len(self.idx_to_token) == 1 + len(reserved):
            top = self._token_freqs[0][1]
            raise DataError(f"min_freq={min_freq} leaves no token in the vocabulary (the most frequent "
                            f"one occurs {top} times): use min_freq <= {top}")

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """The index of a token (0 if unknown), or nested lists of indices for nested lists of tokens."""
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, 0)
        return [self.__getitem__(token) for token in tokens]

    def __contains__(self, token):
        return token in self.token_to_idx

    def to_tokens(self, indices):
        """The token of an index, or a list of tokens for a list (or array) of indices."""
        if isinstance(indices, np.ndarray):
            indices = indices.tolist()
        if isinstance(indices, (list, tuple)):
            if all(type(index) is int for index in indices) and \
                    (not indices or 0 <= min(indices) and max(indices) < len(self.idx_to_token)):
                return [self.idx_to_token[index] for index in indices]  # a flat list of valid indices
            return [self.to_tokens(index) for index in indices]
        if isinstance(indices, (bool, np.bool_)) or not isinstance(indices, (int, np.integer)):
            raise ArgumentError(f"a token index must be a whole number, got {indices!r}")
        if not 0 <= indices < len(self.idx_to_token):
            raise ArgumentError(f"token index {indices} is outside the vocabulary (0 to {len(self) - 1})")
        return self.idx_to_token[indices]

    @property
    def unk(self):
        """The index of the unknown token: always 0."""
        return 0

    @property
    def token_freqs(self):
        """``(token, count)`` pairs of the counted text, most frequent first."""
        return self._token_freqs

    def to_dict(self):
        """The vocabulary as plain data (lists of strings and ints) for a checkpoint or JSON file."""
        return {"idx_to_token": list(self.idx_to_token),
                "token_freqs": [[token, freq] for token, freq in self._token_freqs]}

    @classmethod
    def from_dict(cls, data):
        """Rebuild a vocabulary saved with :meth:`to_dict`: the same index for every token."""
        vocab = cls.from_tokens_list(data["idx_to_token"])
        vocab._token_freqs = [(token, int(freq)) for token, freq in data.get("token_freqs", [])]
        return vocab

    @classmethod
    def from_tokens_list(cls, idx_to_token):
        """The vocabulary whose token of index ``i`` is ``idx_to_token[i]`` (``<unk>`` must come first)."""
        idx_to_token = list(idx_to_token)
        if not idx_to_token or idx_to_token[0] != UNK:
            first = repr(idx_to_token[0]) if idx_to_token else "nothing"
            raise DataError(f"a vocabulary's token list must start with '{UNK}', not {first}: "
                            "pass the idx_to_token list saved from a Vocab")
        if len(set(idx_to_token)) != len(idx_to_token):
            dup = next(t for t, c in collections.Counter(idx_to_token).items() if c > 1)
            raise DataError(f"token {dup!r} appears twice in the vocabulary's token list: "
                            "pass the idx_to_token list saved from a Vocab")
        vocab = cls.__new__(cls)
        vocab.idx_to_token = idx_to_token
        vocab.token_to_idx = {token: idx for idx, token in enumerate(idx_to_token)}
        vocab._token_freqs = []
        return vocab

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.idx_to_token == other.idx_to_token

    __hash__ = None

    def __repr__(self):
        head = ", ".join(repr(t) for t in self.idx_to_token[:6])
        more = ", ..." if len(self) > 6 else ""
        return f"Vocab({len(self)} tokens: [{head}{more}])"
