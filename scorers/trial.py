"""One call of a scorer on a tiny input, forward and backward, under a causal and a padding mask
(:func:`trial`): a scorer that cannot train fails here in milliseconds, before a run plans cells
for it. A failure names the scorer's own code: a ``weights`` it does not define (or misspells),
a ``weights`` that takes no mask, or the traceback from the first frame of the file that defines
it."""
from __future__ import annotations

import difflib
import inspect
import traceback
from dataclasses import dataclass

import torch

from .base import LogitsScorer, ModuleScorer, causal_mask, padding_mask
from .plugins import one_line, own_frames
from .registry import create_scorer, get_scorer_class

BATCH, HEADS, LENGTH, DIM = 2, 2, 8, 4

# The method each kind of scorer must define, and the arguments a run passes it after self.
REQUIRED = ((LogitsScorer, "weights", ("s", "mask")),
            (ModuleScorer, "weights_from_qk", ("q", "k", "mask")))


@dataclass(frozen=True)
class TrialFailure:
    """Why ``scorer`` cannot run: ``reason`` in one line, and ``traceback`` the frames of the
    code that raised (empty when the reason says it all)."""

    scorer: str
    defined_in: str
    reason: str
    traceback: str = ""

    def report(self) -> str:
        return self.reason + ("\n" + self.traceback if self.traceback else "\n")


def is_builtin(name: str) -> bool:
    """Whether ``name`` is one of this package's scorers (not a plugin's or an entry point's)."""
    module = get_scorer_class(name).__module__
    return module == __package__ or module.startswith(__package__ + ".")


def source_of(obj) -> tuple[str, int]:
    """The file and first line of a class's or function's definition."""
    try:
        return inspect.getsourcefile(obj) or "?", inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return "?", 0


def trial(name: str, kwargs: dict | None = None) -> TrialFailure | None:
    """None when the scorer ``name`` (with ``kwargs``) runs forward and backward on a tiny input
    under each mask a task gives it; else why not."""
    cls = get_scorer_class(name)
    file, line = source_of(cls)
    problem = _definition_problem(cls)
    if problem:
        reason, obj = problem
        return TrialFailure(name, file, f"scorer {name}: {reason}", _frame(obj, cls))
    try:
        _call(create_scorer(name, num_heads=HEADS, max_len=2 * LENGTH, **(kwargs or {})))
    except Exception as exc:  # noqa: BLE001 - any exception is the scorer's failure, reported
        frames = own_frames(exc, file) if file != "?" else None
        if frames is None:
            frames = "".join(traceback.format_exception(exc)[-3:])
        return TrialFailure(name, file, f"scorer {name} ({file}, line {line}) raised "
                                        f"{one_line(exc)} on a tiny input (forward and backward, "
                                        "causal and padding masks)", frames)
    return None


def _frame(obj, cls: type) -> str:
    """A traceback's frame pointing at the definition of ``obj`` (a method, or ``cls``)."""
    file, line = source_of(obj)
    if file == "?":
        return ""
    name = cls.__qualname__ + ("" if obj is cls else "." + obj.__name__)
    return "".join(traceback.StackSummary.from_list([(file, line, name, None)]).format())


def _definition_problem(cls: type) -> tuple[str, object] | None:
    """A method the scorer's kind needs that it does not define, or defines without taking the
    arguments a run passes it; and the definition to point at."""
    for base, method, args in REQUIRED:
        if not issubclass(cls, base):
            continue
        wanted = f"{method}(self, {', '.join(args)})"
        function = getattr(cls, method)
        if function is getattr(base, method):
            own = {n: v for k in reversed(cls.__mro__) if k is not base and issubclass(k, base)
                   for n, v in vars(k).items() if not n.startswith("__")}
            near = difflib.get_close_matches(method, list(own), n=1, cutoff=0.6)
            if near and inspect.isfunction(own[near[0]]):
                return (f"{cls.__qualname__} defines {near[0]}, not {method}, which a "
                        f"{base.__name__} must define: rename it {method}", own[near[0]])
            return (f"{cls.__qualname__} defines no {method}, which a {base.__name__} must: "
                    f"define {wanted}", cls)
        try:
            inspect.signature(function).bind(*(object() for _ in range(len(args) + 1)))
        except TypeError:
            return (f"{cls.__qualname__}.{method}{inspect.signature(function)} does not take "
                    f"({', '.join(args)}): define it as {wanted}, mask a boolean tensor, "
                    "True = visible", function)
        except ValueError:
            pass
    return None


def _masks(causal_only: bool) -> dict[str, torch.Tensor]:
    valid = torch.arange(LENGTH)[None, :] < torch.tensor([LENGTH, LENGTH - 3])[:, None]
    causal, padding = causal_mask(LENGTH), padding_mask(valid)
    out = {"causal": causal, "causal and padding": causal & padding}
    if not causal_only:
        out["padding"] = padding
    return out


def _call(scorer) -> None:
    g = torch.Generator().manual_seed(0)
    for mask in _masks(scorer.causal_only).values():
        q, k, v = (torch.randn(BATCH, HEADS, LENGTH, DIM, generator=g).requires_grad_()
                   for _ in range(3))
        out = scorer.attend(q, k, v, mask)
        (out * torch.randn(out.shape, generator=g)).sum().backward()
