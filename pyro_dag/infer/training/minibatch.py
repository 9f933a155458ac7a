"""The size rule of :func:`~pyro_dag.infer.train`'s steps: minibatches of cases above a number of cases.

A step of the DAGELBO (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Algorithm 4) costs
``O(S B Σ_w M_w²)`` for ``B`` cases: full batch, a hidden node's ``x -> h -> y`` chain took 1.1 s per step at
``n = 2·10⁴`` and ten times that at ``2·10⁵``. The model's ``"data"`` plate subsamples (``subsample_size``), and the
ELBO of a random minibatch of ``B`` cases, its data term scaled by ``n / B``, is an unbiased estimate of the full
one (Hoffman, Blei, Wang & Paisley 2013, "Stochastic variational inference", JMLR; Hensman, Fusi & Lawrence 2013,
"Gaussian processes for big data", UAI). Above :data:`MINIBATCH_ABOVE` cases :func:`choose_minibatch` gives the
steps minibatches of :data:`MINIBATCH_SIZE` cases and says so in one line
(:class:`~pyro_dag.progress.ScaledDefaultWarning`); ``train(..., minibatch=False)`` keeps full-batch steps, and a
``subsample_size`` of the user's own in ``model_kwargs`` is left as it is.

It does not apply where the minibatch would change what is fitted or how fast: models with latent inputs (their
per-case guide parameters would move only when their case is drawn), ``collapse="inducing"`` nodes (integrated out
of all cases jointly), a DAGDGP inside a larger model (the keyword goes to the outer model) and data-parallel runs
(each process's ``subsample_size`` is its own).
"""
import warnings

from ...progress import ScaledDefaultWarning

__all__ = ["MINIBATCH_ABOVE", "MINIBATCH_SIZE", "choose_minibatch"]

#: Cases above which the default steps use minibatches.
MINIBATCH_ABOVE = 8192

#: Cases per minibatch of the default steps.
MINIBATCH_SIZE = 2048


def choose_minibatch(minibatch, model, dgp, num_cases, model_kwargs, *, distributed=False, name="train",
                     above=None, size=None):
    """The ``subsample_size`` of ``train``'s steps, or ``None`` for full-batch steps (module docstring); warns
    when the rule chooses minibatches.

    :param minibatch: ``"auto"`` (the rule) or ``False`` (full batch). :param model: the model ``train`` runs.
    :param dgp: the :class:`~pyro_dag.DAGDGP` in it (set up), or ``None``. :param int num_cases: ``n``.
    :param dict model_kwargs: the run's keyword arguments (a ``subsample_size`` or ``subsample`` there wins).
    :param int above: the threshold (default :data:`MINIBATCH_ABOVE`). :param int size: ``B`` (default
        :data:`MINIBATCH_SIZE`).
    :returns: ``B`` or ``None``.
    """
    above = MINIBATCH_ABOVE if above is None else int(above)
    size = MINIBATCH_SIZE if size is None else int(size)
    kw = model_kwargs or {}
    if minibatch is False or "subsample_size" in kw or "subsample" in kw or distributed:
        return None
    if dgp is None or model is not dgp or num_cases <= above or size >= num_cases:
        return None
    if dgp.latent_inputs or getattr(dgp, "collapse", "values") == "inducing":
        return None
    warnings.warn(f"{name}: {num_cases} cases, so each step uses a random minibatch of {size} (the data term scaled "
                  f"by n/B, an unbiased ELBO); pass minibatch=False for full-batch steps or "
                  "model_kwargs={'subsample_size': B} to choose B", ScaledDefaultWarning, stacklevel=4)
    return size
