"""Generalized Potts models by pseudo-likelihood: factored self-attention or plmDCA.

Beside them, the baseline of one layer of vanilla self-attention trained on the
same masked-token task (:class:`VanillaAttentionPseudoLikelihood`).

Also the alignment tools a computational biologist needs around it: reading
FASTA/A2M alignments, encoding, filtering, sequence reweighting, contact
scores with their precision against a structure, and files for other tools
(ranked contact tables, plmc's coupling scores, the model's parameters).
"""

from ._alignment import (
    ALPHABETS,
    decode_sequences,
    encode_sequences,
    filter_alignment,
    read_alignment,
    sequence_weights,
)
from ._contacts import (
    apc,
    contact_precision,
    frobenius_scores,
    read_contact_map,
    read_couplings,
    write_contacts,
    write_couplings,
    write_ec,
)
from ._estimator import PottsPseudoLikelihood
from ._sampling import (
    conditional_log_probs,
    enumerate_states,
    exact_conditional_entropy,
    exact_distribution,
    gibbs_sample,
    zero_sum_gauge,
)
from ._vanilla_estimator import VanillaAttentionPseudoLikelihood

__all__ = [
    "ALPHABETS",
    "PottsPseudoLikelihood",
    "VanillaAttentionPseudoLikelihood",
    "apc",
    "conditional_log_probs",
    "contact_precision",
    "decode_sequences",
    "encode_sequences",
    "enumerate_states",
    "exact_conditional_entropy",
    "exact_distribution",
    "filter_alignment",
    "frobenius_scores",
    "gibbs_sample",
    "read_alignment",
    "read_contact_map",
    "read_couplings",
    "sequence_weights",
    "write_contacts",
    "write_couplings",
    "write_ec",
    "zero_sum_gauge",
]
