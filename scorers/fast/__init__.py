"""Fast forms of the registry's scorers, each equal to the scorer's ``reference_attend``
(tests/test_fast_*.py), and the policy that gives each scorer one.

    from scorers.fast import accelerate
    accelerate(model, mode="auto")       # -> {scorer name: the path its attend runs}

Each scorer declares what a form needs as data, ``kernels()`` (scorers/forms.py); nothing here is
keyed by scorer name. :func:`accelerate` (policy.py) stores, per scorer instance, the form object
its ``attend`` runs (``scorer.form``); parameters, buffers, state dict and class stay as they are.

The package, one module per job:

- ``planning.py``: query blocks and the keys they see (the blocked forms' key truncation);
- ``tiles.py``: the (query block, key block) tiles of the forms with recompute;
- ``blocked.py``, ``blocked_sparse.py``, ``blocked_rows.py``, ``blocked_stick.py``: ``blocked``,
  attention with recompute for the scorers declaring a ``blocked`` kernel (softmaxes of
  transformed logits, gates, sparsemax, entmax; softpick, the signed and self-adjust softmaxes;
  sigmoid stick-breaking);
- ``ssa.py``: ``dense``, the SSA family's whole-matrix kernel;
- ``sparse.py``: ``pivot``, sparsemax and entmax without the sort or bisection;
- ``flex.py``: ``flex``, FlexAttention score_mods;
- ``policy.py``: the modes, ``auto``'s table (:data:`AUTO`) and :func:`accelerate`;
- ``extra/``: the forms no device's ``auto`` chooses (``fused``, ``topk``, ``compile``), opt-in:
  :func:`modes` (``scorebench bench``) and a mode naming one of them import it.

Adding a form (here or in a plugin's own file) is one class and its registration::

    from scorers.forms import FastForm, register_form

    @register_form("windowed")
    class WindowedForm(FastForm):
        kernel = "blocked"        # the Kernels field it runs (or override applies_to)
        compiles = False          # what preparing it costs: True if its first call compiles
        auto = ("cuda",)          # a plugin's: device types where auto may give it, after AUTO's

        def attend(self, scorer, q, k, v, mask):   # self.block_size, self.compiled: its options
            ...

It is then a mode of :func:`accelerate` and of ``scorebench bench --fast``, ``forms_of()`` lists
it for the scorers it applies to, and ``auto`` gives it, on the devices it names, to those
scorers that no form before it covers.
"""
from ..forms import DEFAULT_BLOCK, FastForm, FastPathError, FlexSpec, Kernels, register_form
from .planning import BlockPlan, block_bounds, causal_block_mask, is_plain_causal, plan_blocks
from .blocked import BlockedForm, blocked_attend, gate_attend, softmax_attend
from .blocked_sparse import sparse_attend
from .ssa import DenseSSA, dense_ssa_attend, ssa_parameters
from .flex import FLEX_RECOMPILE_LIMIT, flex_attend, flex_available, flex_block_mask
from .sparse import pivot_attend
from .policy import (AUTO, FAST_MODES, accelerate, choose_form, choose_path, fast_paths, modes,
                     restore, scorers_with, use_reference)

__all__ = [
    "AUTO", "BlockPlan", "BlockedForm", "DEFAULT_BLOCK", "DenseSSA", "FAST_MODES",
    "FLEX_RECOMPILE_LIMIT", "FastForm", "FastPathError", "FlexSpec", "Kernels", "accelerate",
    "block_bounds", "blocked_attend", "causal_block_mask", "choose_form", "choose_path",
    "dense_ssa_attend", "fast_paths", "flex_attend", "flex_available", "flex_block_mask",
    "gate_attend", "is_plain_causal", "modes", "pivot_attend", "plan_blocks", "register_form",
    "restore", "scorers_with", "softmax_attend", "sparse_attend", "ssa_parameters",
    "use_reference",
]
