"""Scorers whose rows may put mass nowhere: an extra sink logit, or softpick's rectifier."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import LogitsScorer, masked_fill_neg_inf, zero_empty_rows
from .forms import BlockedSpec, FlexSpec, Kernels
from .params import constant, per_head, positive
from .registry import register_scorer


@register_scorer("softmax_plus_one", aliases=("softmax1",), family="sink",
                 normalization="subnormalized",
                 paper="https://www.evanmiller.org/attention-is-off-by-one.html")
class SoftmaxPlusOne(LogitsScorer):
    """w_j = exp(s_j) / (exp(sigma) + sum_{k in V_i} exp(s_k)), sigma = 0 (a softmax over the
    visible logits and one sink logit sigma, with the sink's weight dropped)."""

    def sink_logit(self, s: torch.Tensor) -> torch.Tensor:
        return s.new_zeros(())

    def weights(self, s, mask):
        sink = self.sink_logit(s).expand(*s.shape[:-1], 1)
        x = torch.cat([sink, masked_fill_neg_inf(s, mask)], dim=-1)
        return torch.softmax(x, dim=-1)[..., 1:]

    def sdpa_mask(self, q, k, mask):
        """SDPA mask for keys [zero key, k]: the zero key is visible to every query."""
        if mask is None:
            return None
        return torch.cat([mask.new_ones(*mask.shape[:-1], 1), mask], dim=-1)

    def kernels(self):
        return Kernels(native=("sdpa", self.sdpa_attend), blocked=self.blocked_spec,
                       flex=self.flex_spec)

    def sdpa_attend(self, q, k, v, mask):
        return self.sdpa_with_sink_key(q, k, v, mask, k.new_zeros(*k.shape[:-2], 1, k.shape[-1]))

    def sdpa_with_sink_key(self, q, k, v, mask, sink_key, scale=None):
        """SDPA over the keys [sink_key, k], the sink key visible to every query, its value zero."""
        keys = torch.cat([sink_key, k], dim=-2)
        values = torch.cat([v.new_zeros(*v.shape[:-2], 1, v.shape[-1]), v], dim=-2)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=self.sdpa_mask(q, k, mask),
                                             scale=scale)
        return zero_empty_rows(out, mask)

    def flex_spec(self, q, k, mask):
        """softmax over visible keys scaled by sigmoid(lse - sigma) = sum e^s / (e^sigma + sum e^s)."""
        return FlexSpec(None, lambda out, lse: out * torch.sigmoid(lse))

    def blocked_spec(self, q, k, mask):
        """softmax over the visible keys and the sink logit sigma (its weight dropped)."""
        return BlockedSpec("softmax", sink=self.blocked_sink(q))

    def blocked_sink(self, q):
        return torch.zeros(1, 1, 1, 1, device=q.device)


@register_scorer("learned_sink", family="sink", normalization="subnormalized",
                 paper="gpt-oss sinks (huggingface/transformers); lucidrains/x-transformers")
class LearnedSink(SoftmaxPlusOne):
    """softmax_plus_one with a learned sink logit sigma_h per head (init 0: equals softmax_plus_one)."""

    def __init__(self, **context):
        super().__init__(**context)
        self.sink = constant(0.0, (self.num_heads,))

    def sink_logit(self, s):
        return per_head(self.sink, s)

    def sdpa_attend(self, q, k, v, mask):
        """The sink key's logit is sigma_h for every query through one more coordinate: 1 on the
        queries, 0 on the keys, sigma_h sqrt(d) on the sink key, at SDPA's scale 1/sqrt(d). A bias
        column instead would make SDPA take a (B, H, Lq, Lk) float mask; q, k and v are padded
        with zeros to one width, a multiple of 8, which keeps SDPA on its flash kernel on a CPU."""
        d, dv = q.shape[-1], v.shape[-1]
        width = (max(d, dv) // 8 + 1) * 8
        q1 = F.pad(torch.cat([q, q.new_ones(*q.shape[:-1], 1)], dim=-1), (0, width - d - 1))
        k1 = F.pad(k, (0, width - d))
        sink = (self.sink.to(k.dtype) * math.sqrt(d)).view(1, -1, 1, 1).expand(*k.shape[:-2], 1, 1)
        sink_key = F.pad(torch.cat([k.new_zeros(*k.shape[:-2], 1, d), sink], dim=-1),
                         (0, width - d - 1))
        out = self.sdpa_with_sink_key(q1, k1, F.pad(v, (0, width - dv)), mask, sink_key,
                                      scale=1.0 / math.sqrt(d))
        return out[..., :dv]

    def flex_spec(self, q, k, mask):
        sink = self.sink.float().view(1, -1, 1, 1)
        return FlexSpec(None, lambda out, lse: out * torch.sigmoid(lse - sink))

    def blocked_sink(self, q):
        return self.sink.view(1, -1, 1, 1)


@register_scorer("softpick", family="sink", normalization="subnormalized", paper="arXiv:2504.20966")
class Softpick(LogitsScorer):
    """w_j = relu(e^{s_j} - 1) / (sum_{k in V_i} |e^{s_k} - 1| + eps), eps = 1e-8, computed with
    m = max(0, max_{V_i} s): relu(e^{s-m} - e^{-m}) / (sum_{V_i} |e^{s-m} - e^{-m}| + eps).
    Masked keys are set to 0 before the exp, so they contribute exactly 0 to the denominator."""

    def __init__(self, *, eps: float = 1e-8, **context):
        super().__init__(**context)
        self.eps = positive("eps", eps, "softpick")

    def weights(self, s, mask):
        m = masked_fill_neg_inf(s, mask).amax(-1, keepdim=True).clamp(min=0.0).detach()
        e = torch.exp(s.masked_fill(~mask, 0.0) - m) - torch.exp(-m)
        return torch.relu(e) / (e.abs().sum(-1, keepdim=True) + self.eps)

    def kernels(self):
        return Kernels(blocked=BlockedSpec("softpick", eps=self.eps))
