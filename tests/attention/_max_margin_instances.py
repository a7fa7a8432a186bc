"""Max-margin attention instances shared by the attention family's tests."""

from sklearn_attn.attention import make_max_margin_attention_data

NORMS = {"full": ("frobenius", "nuclear"), "diagonal": ("l2", "l1")}


def _full_data(seed=0, n=6, T=4, d=8):
    return make_max_margin_attention_data(n, T, d, random_state=seed)


def _diag_data(seed=0, n=5, T=3, d=10):
    return make_max_margin_attention_data(
        n, T, d, structure="diagonal", random_state=seed
    )
