"""Independent float64 (numpy) references of every built-in scorer, written from docs/scorers.md.

A row reference maps the visible logits x of one row (in key order) and the scorer's settings for
that head to the weights of those keys; a matrix reference maps (q, k, mask) to all weights.
Parameters are read from the scorer through their documented parametrization only.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def softplus(x):
    return math.log1p(math.exp(x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def entmax(x, alpha):
    """alpha-entmax by root finding: sum [(alpha-1)x - tau]_+^{1/(alpha-1)} = 1."""
    z = (alpha - 1.0) * x

    def excess(tau):
        return (np.maximum(z - tau, 0.0) ** (1.0 / (alpha - 1.0))).sum() - 1.0

    tau = brentq(excess, z.max() - 1.5, z.max(), xtol=1e-15, maxiter=500)
    return np.maximum(z - tau, 0.0) ** (1.0 / (alpha - 1.0))


def sparsemax_sorted(x):
    """Closed form of Martins & Astudillo: tau = (sum_{j<=k} z_(j) - 1) / k on the support."""
    z = np.sort(x)[::-1]
    cums = np.cumsum(z)
    ks = np.arange(1, len(z) + 1)
    k = ks[1 + ks * z > cums].max()
    return np.maximum(x - (cums[k - 1] - 1.0) / k, 0.0)


def ssa_direct(x, n, b):
    """w ∝ (1 + b|x|)^(n sgn x)."""
    u = (1.0 + b * np.abs(x)) ** (n * np.sign(x))
    return u / u.sum()


ADAPTIVE = [-0.037, 0.481, -2.3, 4.917, -1.791]


def adaptive_beta(h):
    return max(np.polyval(ADAPTIVE, h), 1.0) if h > 0.5 else 1.0


def head_value(param, h):
    flat = param.detach().double().reshape(-1).numpy()
    return float(flat[h] if flat.size > 1 else flat[0])


def row_reference(name, sc, x, h):
    """Weights of the visible keys x of one row, head h (None when there is no row reference)."""
    if name == "softmax":
        return softmax(x)
    if name == "temperature_softmax":
        tau = math.exp(head_value(sc.log_tau, h)) if sc.learnable else sc.tau
        return softmax(x / tau)
    if name == "sparsemax":
        return sparsemax_sorted(x)
    if name == "entmax15":
        return entmax(x, 1.5)
    if name == "entmax_bisect":
        alpha = min(max(1.0 + 1.0 / (1.0 + math.exp(-head_value(sc.alpha_logit, h))), 1.01), 2.0) \
            if sc.learn_alpha else sc.alpha
        return entmax(x, alpha)
    if name in ("ssa", "ssa_n2", "ssa_n1_5"):
        n = softplus(head_value(sc.rho, 0)) if sc.learn_n else head_value(sc.n_fixed, 0)
        b = softplus(head_value(sc.beta, 0)) if sc.learn_b else head_value(sc.b_fixed, 0)
        return ssa_direct(x, n, b)
    if name == "ssa_gpt2":
        return ssa_direct(x, math.exp(head_value(sc.nu, 0)), math.exp(head_value(sc.a, 0)))
    if name == "stablemax":
        u = np.where(x >= 0, x + 1.0, 1.0 / (1.0 - x))
        return u / u.sum()
    if name == "ssmax":
        return softmax(head_value(sc.sigma, h) * math.log(len(x)) * x)
    if name == "sigmoid":
        return sigmoid(x - math.log(sc.max_len))
    if name == "softmax_plus_one":
        return np.exp(x) / (1.0 + np.exp(x).sum())
    if name == "learned_sink":
        return np.exp(x) / (math.exp(head_value(sc.sink, h)) + np.exp(x).sum())
    if name == "softpick":
        m = max(0.0, x.max())
        e = np.exp(x - m) - np.exp(-m)
        return np.maximum(e, 0.0) / (np.abs(e).sum() + 1e-8)
    if name in ("relu", "relu2"):
        length = len(x) if sc.length == "visible" else sc.max_len
        return np.maximum(x, 0.0) ** (1 if name == "relu" else 2) / length
    if name == "adaptive_temperature":
        p = softmax(x)
        entropy = -(p * np.log(p)).sum()
        return softmax(adaptive_beta(entropy) * x)
    if name == "sa_softmax":
        p = softmax(x)
        if sc.variant == "plain":
            return x * p
        lo, hi = min(x.min(), 0.0), max(x.max(), 0.0)
        return (x - lo) / max(hi - lo, 1e-10) * p
    if name == "cog_signed":
        return np.sign(x) * softmax(np.abs(x))
    return None


def stick_breaking(s, vis, attend_current):
    """Direct products: A_ij = sigmoid(s_ij) prod_{j<k<i, k visible} (1 - sigmoid(s_ik))."""
    w = np.zeros_like(s)
    beta = sigmoid(s)
    for i in range(s.shape[0]):
        past = [j for j in range(i) if vis[i, j]]
        for j in past:
            w[i, j] = beta[i, j] * np.prod([1.0 - beta[i, k] for k in past if k > j])
        if attend_current and vis[i, i]:
            w[i, i] = 1.0 - sum(w[i, j] for j in past)
    return w


def matrix_reference(name, sc, q, k, mask):
    """(B, H, Lq, Lk) float64 weights from numpy q, k (B, H, L, d) and a boolean mask."""
    bsz, heads, lq, d = q.shape
    lk = k.shape[2]
    mask = np.broadcast_to(mask, (bsz, heads, lq, lk))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    w = np.zeros((bsz, heads, lq, lk))
    for b in range(bsz):
        for h in range(heads):
            if name == "stick_breaking":
                w[b, h] = stick_breaking(s[b, h], mask[b, h], sc.attend_current)
                continue
            if name in ("cosformer", "linear_elu"):
                if name == "cosformer":
                    theta = np.arange(1, lk + 1) * math.pi / 2 / sc.max_len
                    phq, phk = np.maximum(q[b, h], 0), np.maximum(k[b, h], 0)
                    a = (phq @ phk.T) * np.cos(theta[lk - lq:, None] - theta[None, :])
                else:
                    elu = lambda x: np.where(x > 0, x + 1.0, np.exp(x))  # noqa: E731
                    a = elu(q[b, h]) @ elu(k[b, h]).T
                a = a * mask[b, h]
                w[b, h] = a / np.maximum(a.sum(-1, keepdims=True), 1e-6)
                continue
            for i in range(lq):
                vis = mask[b, h, i]
                if vis.any():
                    w[b, h, i, vis] = row_reference(name, sc, s[b, h, i, vis], h)
    return w


def has_reference(name) -> bool:
    return name in REFERENCED


REFERENCED = {
    "softmax", "temperature_softmax", "sparsemax", "entmax15", "entmax_bisect", "ssa", "ssa_gpt2",
    "ssa_n2", "ssa_n1_5",
    "stablemax", "ssmax", "sigmoid", "softmax_plus_one", "learned_sink", "softpick", "relu",
    "relu2", "adaptive_temperature", "sa_softmax", "cog_signed", "stick_breaking", "cosformer",
    "linear_elu",
}
