"""The path ``auto`` gives every built-in scorer (each non-default configuration of the scorer
checks too), on a CPU and on CUDA, the path it runs as shipped (``off``), and the forms a named
mode gives it: the table was read from the code before the scorer surface was narrowed (issue
#52) and holds it to the same choices. Choosing reads the device's type only, so CUDA's column
needs no GPU."""
from __future__ import annotations

import pytest

from scorers.fast import choose_path, modes
from scorer_checks import config_id, configs, make_scorer

# config: (auto on cpu, auto on cuda, off, the forms a named mode runs)
CHOICES = {
    'adaptive_temperature': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'cog_signed': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'cosformer': ('linear', 'linear', 'linear',
        ''),
    'entmax15': ('blocked', 'reference', 'reference',
        'blocked topk pivot compile'),
    'entmax_bisect': ('blocked', 'reference', 'reference',
        'blocked pivot compile'),
    'learned_sink': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'linear_elu': ('linear', 'linear', 'linear',
        ''),
    'relu': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'relu2': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'sa_softmax': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'sigmoid': ('blocked', 'flex', 'reference',
        'blocked flex compile'),
    'softmax': ('sdpa', 'sdpa', 'sdpa',
        'flex compile'),
    'softmax_plus_one': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'softpick': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'sparsemax': ('blocked', 'reference', 'reference',
        'blocked topk pivot compile'),
    'ssa': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'ssa_gpt2': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'ssa_n1_5': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'ssa_n2': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'ssmax': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'stablemax': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'stick_breaking': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'temperature_softmax': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'adaptive_temperature[beta_grad=True]': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'entmax_bisect[learn_alpha=True]': ('blocked', 'reference', 'reference',
        'blocked pivot compile'),
    'entmax_bisect[alpha=1.3,n_iter=30]': ('blocked', 'reference', 'reference',
        'blocked pivot compile'),
    'relu[length=fixed]': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'relu2[length=fixed]': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'sa_softmax[variant=plain]': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'ssa[learn_b=True]': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'ssa[learn_n=False,n=2.0]': ('dense<1024|blocked', 'flex', 'reference',
        'blocked fused dense flex compile'),
    'stick_breaking[attend_current=False]': ('blocked', 'reference', 'reference',
        'blocked compile'),
    'temperature_softmax[tau=0.5]': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'temperature_softmax[learnable=True]': ('blocked', 'sdpa', 'sdpa',
        'blocked flex compile'),
    'entmax_bisect[alpha=2.5]': ('pivot', 'reference', 'reference',
        'pivot compile'),
}

CONFIGS = configs() + [("entmax_bisect", {"alpha": 2.5})]


def test_the_table_covers_every_configuration():
    assert sorted(CHOICES) == sorted(map(config_id, CONFIGS))


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_auto_chooses_the_same_path_as_before(config):
    cpu, cuda, off, forms = CHOICES[config_id(config)]
    scorer = make_scorer(*config)
    assert (choose_path(scorer, "cpu", "auto"), choose_path(scorer, "cuda", "auto"),
            choose_path(scorer, "cpu", "off")) == (cpu, cuda, off)
    named = {m for m in modes() if m not in ("auto", "off")
             and choose_path(scorer, "cpu", m) == m}
    assert named == set(forms.split())
