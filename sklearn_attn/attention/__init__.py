"""Learning multi-head softmax attention layers (Chen and Li, 2024).

- :class:`~sklearn_attn.MultiHeadAttentionLearner`: fits
  ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` by L-BFGS (or gradient descent,
  Adam) on analytic gradients, with restarts and an exact least-squares refit of the
  ``W_i``.
- :func:`match_heads`: pairs learned heads with true ones (Hungarian matching) and
  reports relative parameter errors.
- :func:`multihead_attention` and :class:`AttentionLayer`: evaluate a layer given its
  parameters.

The implicit bias of softmax attention (Sheen, Chen, Wang and Zhou, 2024):

- :func:`make_max_margin_attention_data` and :func:`train_attention_classifier`: a
  one-layer attention classifier with a fixed value head, trained by (normalised)
  gradient descent with separate key/query or combined weights, in log-domain
  arithmetic that stays accurate after the attention saturates;
- :func:`max_margin_svm`, :func:`max_margin_feasible`, :func:`attention_margin`: the
  reference max-margin problems (Frobenius, nuclear, l2 and l1 norms).
"""

from ._implicit_bias import AttentionTrainingResult, train_attention_classifier
from ._instances import make_max_margin_attention_data
from ._layer import AttentionLayer, multihead_attention
from ._learner import MultiHeadAttentionLearner
from ._matching import match_heads
from ._max_margin import attention_margin, max_margin_feasible, max_margin_svm

__all__ = [
    "AttentionLayer",
    "AttentionTrainingResult",
    "MultiHeadAttentionLearner",
    "attention_margin",
    "make_max_margin_attention_data",
    "match_heads",
    "max_margin_feasible",
    "max_margin_svm",
    "multihead_attention",
    "train_attention_classifier",
]
