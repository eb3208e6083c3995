"""The forms no device's ``auto`` chooses, kept for ``scorebench bench --fast`` and explicit
modes of :func:`scorers.fast.accelerate`: importing this package registers them, and
:func:`scorers.fast.modes` (which the bench reads) or a mode that names one of them imports it;
training under ``auto`` or ``off`` never does.

- ``fused.py``: ``fused``, the SSA family's blocked kernel with compiled elementwise passes (no
  faster to train than ``dense`` and ``blocked`` on a CPU, minutes of compilation per scorer);
- ``topk.py``: ``topk``, sparsemax and entmax15 through the ``entmax`` package's partial sort
  (slower to train than the reference on a CPU, 3-4x slower than it on an H200);
- ``compiled.py``: ``compile``, ``torch.compile`` of a logits-kind scorer's own weights per
  query block (100-230 s of compilation per scorer on a 2-core CPU).
"""
from .compiled import CompileForm, compiled_attend
from .fused import FusedForm, FusedSSA, fused_ssa_attend
from .topk import DEFAULT_TOPK, TopkForm, topk_attend, topk_weights

OPT_IN_FORMS = (CompileForm, FusedForm, TopkForm)

__all__ = ["CompileForm", "DEFAULT_TOPK", "FusedForm", "FusedSSA", "OPT_IN_FORMS", "TopkForm", "compiled_attend",
           "fused_ssa_attend", "topk_attend", "topk_weights"]
