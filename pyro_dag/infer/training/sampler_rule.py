"""The size rule of :func:`~pyro_dag.infer.train`'s sampler: the conditional sampler until its state would not fit.

:class:`~pyro_dag.infer.DAGELBO`'s default conditional sampler (the marginal ancestral sampling of Perlino,
Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Algorithm 2) updates, for every node, the ``[S, B, P, P]``
square-root block of each column on the node's elimination-tree path. On a deep graph with large blocks that state
grows with the square of the depth: a chain of 20 hidden nodes with 64 inducing points each (``num_inducing="auto"``
on 100 cases), 4 samples, took 57 CPU s and 9 GiB per three steps, and a chain of 50 ran out of memory
(``benchmarks/setup_scaling.py``). The joint sampler (one block back-substitution per draw) is the same ELBO in
expectation at a cost per node independent of the depth, with more gradient variance, so :func:`choose_sampler`
switches to it above :data:`CONDITIONAL_STATE_BUDGET` and says so in one line.

On the binary trees of ``benchmarks/tree_scaling.py`` (20 cases, 20 inducing points per node) the state with
``train``'s 4 samples is 376 MiB at depth 7 (254 GP nodes), 875 MiB at depth 8 and 2.0 GiB at depth 9 (1022 GP
nodes), so ``train`` uses the joint sampler from depth 8, whose ELBO + gradient costs 1.36× mean field's at depth 9
(``benchmarks/sampler_rule_trees.py``); with one sample the depth-9 state
(500 MiB) fits and the conditional sampler stays (3.45× mean field's CPU there): its variance-adjusted work is the
lower one on every tree measured (``benchmarks/sampler_work.py``).
"""
import warnings

from ...progress import ScaledDefaultWarning
from ..autoguide.families import StructuredFamily
from ..elbo import DAGELBO

__all__ = ["CONDITIONAL_STATE_BUDGET", "choose_sampler"]

#: Bytes of the conditional sampler's square-root state per ELBO evaluation above which train uses the joint
#: sampler (autograd keeps about three times this for the backward pass).
CONDITIONAL_STATE_BUDGET = 512 * 2 ** 20


def choose_sampler(elbo, family, num_cases, name="train", budget=CONDITIONAL_STATE_BUDGET):
    """Switch ``elbo`` (a :class:`~pyro_dag.infer.DAGELBO` that ``train`` built) to ``sampler="joint"`` when the
    conditional sampler's state on the sparse chordal ``family`` would exceed ``budget`` bytes for ``num_cases``
    cases per step; warns (:class:`~pyro_dag.progress.ScaledDefaultWarning`) with what was done instead.

    :returns: the sampler the ELBO uses.
    """
    if not isinstance(elbo, DAGELBO) or elbo.sampler != "conditional" or not isinstance(family, StructuredFamily):
        return getattr(elbo, "sampler", None)
    if family.resolved_backend() != "sparse":  # the dense state is [S, B, size] whatever the depth
        return elbo.sampler
    need = family.conditional_state_bytes(elbo.num_particles, num_cases)
    if need > budget:
        elbo.sampler = "joint"
        warnings.warn(f"{name}: the conditional sampler's state would take {need / 2 ** 30:.1f} GiB per step on this "
                      f"graph ({len(family.blocks)} blocks, {num_cases} cases, {elbo.num_particles} samples; budget "
                      f"{budget / 2 ** 30:.1f} GiB): DAGELBO(sampler='joint') is used instead (pass elbo=DAGELBO(...) "
                      "to choose)", ScaledDefaultWarning, stacklevel=3)
    return elbo.sampler
