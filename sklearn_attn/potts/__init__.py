"""Generalized Potts models by pseudo-likelihood: factored self-attention or plmDCA.

Beside them, the baseline of one layer of vanilla self-attention trained on the
same masked-token task (:class:`VanillaAttentionPseudoLikelihood`).

Also what the models read and say: aligned sequences as integer codes
(encoding, filtering, sequence reweighting), contact scores of fitted
couplings, Gibbs sampling and exact enumeration. Alignment files, structures
and files for other tools are the contacts application's
(:mod:`sklearn_attn.contacts`).
"""

import importlib
import warnings

from .._text import ALPHABETS
from ._alignment import (
    check_codes,
    decode_sequences,
    encode_sequences,
    filter_alignment,
    sequence_weights,
)
from ._enumeration import (
    enumerate_states,
    exact_conditional_entropy,
    exact_distribution,
)
from ._estimator import PottsPseudoLikelihood
from ._gather import resolve_algorithm
from ._memory import estimate_fit_memory
from ._sampling import conditional_log_probs, gibbs_sample, zero_sum_gauge
from ._scores import apc, frobenius_scores
from ._vanilla_estimator import VanillaAttentionPseudoLikelihood

__all__ = [
    "ALPHABETS",
    "PottsPseudoLikelihood",
    "VanillaAttentionPseudoLikelihood",
    "apc",
    "check_codes",
    "conditional_log_probs",
    "decode_sequences",
    "encode_sequences",
    "enumerate_states",
    "estimate_fit_memory",
    "exact_conditional_entropy",
    "exact_distribution",
    "filter_alignment",
    "frobenius_scores",
    "gibbs_sample",
    "resolve_algorithm",
    "sequence_weights",
    "zero_sum_gauge",
]

# Names that moved to the contacts application, and what they are now.
_MOVED_TO_CONTACTS = {
    "contact_precision": "contact_precision",
    "read_alignment": "read_alignment",
    "read_contact_map": "read_contact_map",
    "read_couplings": "read_couplings",
    "write_contacts": "write_contacts",
    "write_couplings": "write_couplings",
    "write_ec": "write_ec",
}


def __getattr__(name):
    # Deprecated aliases: the one place this package reaches up to the
    # application, and only when an old name is used.
    if name in _MOVED_TO_CONTACTS:
        warnings.warn(
            f"sklearn_attn.potts.{name} moved to sklearn_attn.contacts."
            f"{_MOVED_TO_CONTACTS[name]} in 0.2 and will be removed from "
            "sklearn_attn.potts in 0.4; import it from sklearn_attn.contacts.",
            FutureWarning,
            stacklevel=2,
        )
        contacts = importlib.import_module("sklearn_attn.contacts")
        return getattr(contacts, _MOVED_TO_CONTACTS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
