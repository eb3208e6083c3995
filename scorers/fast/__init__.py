"""Fast forms of the registry's scorers, each equal to the scorer's ``reference_attend``
(tests/test_fast_*.py), and the policy that gives each scorer one.

    from scorers.fast import accelerate
    accelerate(model, mode="auto")       # -> {scorer name: the path its attend runs}

Each scorer declares what a form needs beside its formula (scorers/forms.py); nothing here is keyed
by scorer name. :func:`accelerate` (policy.py) stores, per scorer instance, the form object its
``attend`` runs (``scorer.fast_form``); parameters, buffers, state dict and class stay as they are.

The package, one module per job:

- ``planning.py``: query blocks and the keys they see (the blocked forms' key truncation);
- ``tiles.py``: the (query block, key block) tiles of the forms with recompute;
- ``blocked.py``, ``blocked_sparse.py``, ``blocked_rows.py``, ``blocked_stick.py``: ``blocked``,
  attention with recompute for the scorers declaring ``blocked_spec`` (softmaxes of transformed
  logits, gates, sparsemax, entmax; softpick, the signed and self-adjust softmaxes; sigmoid
  stick-breaking);
- ``ssa.py``: ``fused`` and ``dense``, the SSA family's kernels;
- ``sparse.py``: ``topk`` and ``pivot``, sparsemax and entmax without the full sort or bisection;
- ``flex.py``: ``flex``, FlexAttention score_mods;
- ``compiled.py``: ``compile``, ``torch.compile`` of the scorer's own weights per query block;
- ``policy.py``: the modes, ``auto`` and :func:`accelerate`.

Adding a form (here or in a plugin's own file) is one class and its registration::

    from scorers.forms import FastForm, register_form

    @register_form("windowed")
    class WindowedForm(FastForm):
        compiles = False          # what preparing it costs: True if its first call compiles
        auto = ("cuda",)          # device types where mode "auto" may give it to a scorer

        @classmethod
        def applies_to(cls, scorer):               # a scorer class or instance
            return getattr(scorer, "window_spec", None) is not None

        def attend(self, scorer, q, k, v, mask):   # self.block_size, self.compiled: its options
            ...

It is then a mode of :func:`accelerate` and of ``scorebench bench --fast``, ``fast_forms()`` lists
it for the scorers it applies to, and ``auto`` gives it, on the devices it names, to those
scorers that no form registered before it covers.
"""
from ..forms import DEFAULT_BLOCK, FastForm, FastPathError, FlexSpec, register_form
from .planning import BlockPlan, block_bounds, causal_block_mask, is_plain_causal, plan_blocks
# Registration order is auto's precedence: blocked before the SSA kernels and pivot.
from .blocked import BlockedForm, blocked_attend, gate_attend, softmax_attend
from .blocked_sparse import sparse_attend
from .ssa import DenseSSA, FusedSSA, dense_ssa_attend, fused_ssa_attend, ssa_parameters
from .flex import FLEX_RECOMPILE_LIMIT, flex_attend, flex_available, flex_block_mask
from .sparse import DEFAULT_TOPK, pivot_attend, topk_attend, topk_weights
from .compiled import compiled_attend
from .policy import (FAST_MODES, accelerate, choose_form, choose_path, fast_paths, modes, restore,
                     scorer_path, scorers_with, use_reference)

__all__ = [
    "BlockPlan", "BlockedForm", "DEFAULT_BLOCK", "DEFAULT_TOPK", "DenseSSA", "FAST_MODES",
    "FLEX_RECOMPILE_LIMIT", "FastForm", "FastPathError", "FlexSpec", "FusedSSA", "accelerate",
    "block_bounds", "blocked_attend", "causal_block_mask", "choose_form", "choose_path",
    "compiled_attend", "dense_ssa_attend", "fast_paths", "flex_attend", "flex_available",
    "flex_block_mask", "fused_ssa_attend", "gate_attend", "is_plain_causal", "modes",
    "pivot_attend", "plan_blocks", "register_form", "restore", "scorer_path", "scorers_with",
    "softmax_attend", "sparse_attend", "ssa_parameters", "topk_attend", "topk_weights",
    "use_reference",
]
