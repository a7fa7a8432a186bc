"""One layer of vanilla self-attention for masked-token prediction, with gradients.

Tokens and positions share one representation: site ``j`` of a sequence ``s`` is
``x_j = E[s_j] + P[j]`` (``E`` the token embeddings, ``P`` the position
embeddings, both of width ``d``). To predict site ``i``, its token is replaced
by the mask embedding ``m``, ``x~_i = m + P[i]``, and one softmax attention
layer with a residual connection reads out the logits over the ``q`` states,

    a_ij = softmax_j( <x~_i W_Q, y_j W_K> / sqrt(d) ),  y_j = x_j (j != i), y_i = x~_i,
    z_i  = (x~_i + sum_j a_ij y_j W_V) W_O + b,
    p(s_i = a | s_-i) = softmax_a z_i(a).

All ``L`` masked copies of a sequence share the unmasked ``y_j``: their keys and
values are computed once, and only the masked site's own key, value and query
(which depend on its position alone) differ. Unlike factored attention
(:mod:`._model`), the attention weights depend on the tokens, and what a site
sends mixes its token with its position: one such layer does not represent a
generalized Potts model in general (Rende, Gerace, Laio and Goldt, 2024).

The objective is that of :mod:`._model`, in its units:
``-sum_s w_s sum_i log p(s_i | s_-i) + alpha / 2 * |theta|^2`` (every parameter
but the output bias ``b``). Nothing here knows about scikit-learn; arrays go
through ``xp`` (NumPy or CuPy), in float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["VanillaAttention"]


class VanillaAttention:
    """Parameter layout, initialisation, conditionals and objective of the layer.

    The parameter vector holds, in order: ``E`` (q, d), ``m`` (d,), ``P``
    (L, d), ``W_Q``, ``W_K``, ``W_V`` (d, d), ``W_O`` (d, q) and ``b`` (q,).
    """

    names = ("token", "mask", "position", "query", "key", "value", "output", "bias")

    def __init__(self, n_sites, n_states, embedding_dim):
        self.n_sites, self.n_states = n_sites, n_states
        self.embedding_dim = d = embedding_dim
        self.shapes = {
            "token": (n_states, d),
            "mask": (d,),
            "position": (n_sites, d),
            "query": (d, d),
            "key": (d, d),
            "value": (d, d),
            "output": (d, n_states),
            "bias": (n_states,),
        }
        sizes = [int(np.prod(self.shapes[name])) for name in self.names]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.n_params = int(self._offsets[-1])

    def split(self, theta):
        """The parameters as a dict of views of ``theta``."""
        return {
            name: theta[self._offsets[k] : self._offsets[k + 1]].reshape(
                self.shapes[name]
            )
            for k, name in enumerate(self.names)
        }

    def join(self, parts, xp=np):
        """The parameter vector of a dict as :meth:`split` returns it."""
        return xp.concatenate([parts[name].ravel() for name in self.names])

    def initial(self, random_state):
        """Embeddings ``N(0, 1)``; each ``(n_in, n_out)`` matrix ``N(0, 1 / n_in)``.

        Unit-variance representations, and weights that keep their scale
        through each product, so that no factor of the layer starts at zero.
        """
        parts = {}
        for name in self.names:
            shape = self.shapes[name]
            if name == "bias":
                parts[name] = np.zeros(shape)
            elif name in ("token", "mask", "position"):
                parts[name] = random_state.standard_normal(shape)
            else:
                parts[name] = random_state.standard_normal(shape) / np.sqrt(shape[0])
        return self.join(parts)

    # -- forward ---------------------------------------------------------------
    def _tables(self, parts):
        """What the layer computes from its parameters before it sees a sequence.

        With ``M = m + P`` (the masked sites) and ``y_j = E[s_j] + P[j]``, the
        score of site ``i`` for site ``j != i`` is ``key_tokens[i, s_j] +
        key_positions[i, j]``, and for itself ``key_self[i]``; what site
        ``j != i`` adds to the logits of site ``i`` is ``value_tokens[s_j] +
        value_positions[j]``, and site ``i`` itself adds ``value_self[i]``;
        ``residual[i]`` is ``M[i] W_O + b``. Per sequence only these tables
        are read: the work is in arrays of ``(L, L)`` and ``(L, q)``, never of
        width ``d``.
        """
        scale = 1.0 / np.sqrt(self.embedding_dim)
        masked = parts["mask"][None] + parts["position"]
        query = masked @ parts["query"]  # (L, d)
        token_keys = parts["token"] @ parts["key"]
        position_keys = parts["position"] @ parts["key"]
        masked_keys = masked @ parts["key"]
        readout = parts["value"] @ parts["output"]  # W_V W_O, (d, q)
        return {
            "scale": scale,
            "masked": masked,
            "query": query,
            "token_keys": token_keys,
            "position_keys": position_keys,
            "masked_keys": masked_keys,
            "readout": readout,
            "key_tokens": scale * (query @ token_keys.T),  # (L, q)
            "key_positions": scale * (query @ position_keys.T),  # (L, L)
            "key_self": scale * (query * masked_keys).sum(axis=1),  # (L,)
            "value_tokens": parts["token"] @ readout,  # (q, q)
            "value_positions": parts["position"] @ readout,  # (L, q)
            "value_self": masked @ readout,  # (L, q)
            "residual": masked @ parts["output"] + parts["bias"],  # (L, q)
        }

    def _forward(self, tables, codes, xp):
        """Attention weights, what the sites send, and the logits of a block."""
        L = self.n_sites
        diag = xp.arange(L)
        # scores[s, i, j] = key_tokens[i, s_j] + key_positions[i, j] (j != i).
        scores = tables["key_tokens"][:, codes].transpose(1, 0, 2)
        scores += tables["key_positions"][None]
        scores[:, diag, diag] = tables["key_self"][None]
        scores -= scores.max(axis=2, keepdims=True)
        weights = xp.exp(scores, out=scores)
        weights /= weights.sum(axis=2, keepdims=True)
        sent = tables["value_tokens"][codes] + tables["value_positions"][None]
        self_weight = weights[:, diag, diag]  # (n, L)
        logits = xp.matmul(weights, sent)
        logits += self_weight[:, :, None] * (tables["value_self"][None] - sent)
        logits += tables["residual"][None]
        return weights, sent, self_weight, logits

    @staticmethod
    def _log_softmax(logits, xp):
        logits -= logits.max(axis=2, keepdims=True)
        logits -= xp.log(xp.exp(logits).sum(axis=2, keepdims=True))
        return logits

    def log_conditionals(self, theta, codes, xp=np):
        """``log p(s_i = a | s_-i)`` of every site, shape (n, L, q)."""
        tables = self._tables(self.split(theta))
        return self._log_softmax(self._forward(tables, codes, xp)[3], xp)

    # -- objective -------------------------------------------------------------
    def _table_gradients(self, tables, codes, weights, xp):
        """A block's data term and its gradient in the tables of :meth:`_tables`."""
        L, q = self.n_sites, self.n_states
        n = codes.shape[0]
        diag = xp.arange(L)
        att, sent, self_weight, log_p = self._forward(tables, codes, xp)
        log_p = self._log_softmax(log_p, xp)
        observed = xp.take_along_axis(log_p, codes[:, :, None], axis=2)[:, :, 0]
        value = -float(weights @ observed.sum(axis=1))
        # d value / d logits = w_s (p - x).
        g_logits = xp.exp(log_p, out=log_p)
        onehot = xp.zeros((n, L, q))
        xp.put_along_axis(onehot, codes[:, :, None], 1.0, axis=2)
        g_logits -= onehot
        g_logits *= weights[:, None, None]
        g = {"residual": g_logits.sum(axis=0)}
        # Attention weights: what site j sent, or value_self at j = i.
        g_att = xp.matmul(g_logits, sent.transpose(0, 2, 1))
        g_att[:, diag, diag] = (g_logits * tables["value_self"][None]).sum(axis=2)
        # What the sites sent reaches every other site's logits.
        g_sent = xp.matmul(att.transpose(0, 2, 1), g_logits)
        g_sent -= self_weight[:, :, None] * g_logits
        g["value_self"] = (self_weight[:, :, None] * g_logits).sum(axis=0)
        flat_onehot = onehot.reshape(n * L, q)
        g["value_tokens"] = flat_onehot.T @ g_sent.reshape(n * L, q)
        g["value_positions"] = g_sent.sum(axis=0)
        del g_sent, g_logits
        # Softmax backward; the diagonal scores are key_self.
        g_scores = g_att
        g_scores -= (g_att * att).sum(axis=2, keepdims=True)
        g_scores *= att
        g["key_self"] = g_scores[:, diag, diag].sum(axis=0)
        g_scores[:, diag, diag] = 0.0
        g["key_positions"] = g_scores.sum(axis=0)
        g["key_tokens"] = g_scores.transpose(1, 0, 2).reshape(L, n * L) @ flat_onehot
        return value, g

    def data_term(self, theta, codes, weights, xp=np):
        """``-sum_s w_s sum_i log p(s_i | s_-i)`` of a block and its gradient."""
        return self.data_terms(theta, [(codes, weights)], xp)

    def data_terms(self, theta, blocks, xp=np):
        """The data term summed over blocks of ``(codes, weights)``, and its
        gradient: per block in the tables, then once through the parameters."""
        parts = self.split(theta)
        tables = self._tables(parts)
        value = 0.0
        g = None
        for codes, weights in blocks:
            v, g_block = self._table_gradients(tables, codes, weights, xp)
            value += v
            g = g_block if g is None else {k: g[k] + g_block[k] for k in g}
        return value, self._pull_back(parts, tables, g, xp)

    def _pull_back(self, parts, t, g, xp):
        """The gradient in the parameters from the gradient in the tables."""
        scale = t["scale"]
        g_query = scale * (
            g["key_tokens"] @ t["token_keys"]
            + g["key_positions"] @ t["position_keys"]
            + g["key_self"][:, None] * t["masked_keys"]
        )
        g_token_keys = scale * g["key_tokens"].T @ t["query"]
        g_position_keys = scale * g["key_positions"].T @ t["query"]
        g_masked_keys = scale * g["key_self"][:, None] * t["query"]
        g_readout = (
            parts["token"].T @ g["value_tokens"]
            + parts["position"].T @ g["value_positions"]
            + t["masked"].T @ g["value_self"]
        )
        masked = t["masked"]
        out = {}
        out["query"] = masked.T @ g_query
        out["key"] = (
            parts["token"].T @ g_token_keys
            + parts["position"].T @ g_position_keys
            + masked.T @ g_masked_keys
        )
        out["value"] = g_readout @ parts["output"].T
        out["output"] = parts["value"].T @ g_readout + masked.T @ g["residual"]
        out["bias"] = g["residual"].sum(axis=0)
        out["token"] = (
            g_token_keys @ parts["key"].T + g["value_tokens"] @ t["readout"].T
        )
        g_masked = (
            g_query @ parts["query"].T
            + g_masked_keys @ parts["key"].T
            + g["value_self"] @ t["readout"].T
            + g["residual"] @ parts["output"].T
        )
        out["position"] = (
            g_position_keys @ parts["key"].T
            + g["value_positions"] @ t["readout"].T
            + g_masked
        )
        out["mask"] = g_masked.sum(axis=0)
        return self.join(out, xp)

    def objective(self, theta, blocks, alpha, xp=np):
        """The penalised objective over blocks of ``(codes, weights)`` and its gradient.

        ``theta`` is on the device (``xp``); the gradient is returned there.
        """
        value, grad = self.data_terms(theta, blocks, xp)
        penalised = theta[: self._offsets[-2]]  # all but the output bias
        value += 0.5 * alpha * float(penalised @ penalised)
        grad[: self._offsets[-2]] += alpha * penalised
        return value, grad
