"""Sequence to sequence learning: what translation adds to the language models (masked losses so far)."""

from .loss import MaskedSoftmaxCELoss, masked_token_loss, sequence_mask

__all__ = ["sequence_mask", "MaskedSoftmaxCELoss", "masked_token_loss"]
