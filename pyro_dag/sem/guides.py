"""The recommended SVI guide of a :class:`~pyro_dag.sem.LatentSEM`: structured over the globals, local per case.

:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` on the whole model would treat each per-case latent site
``"{X}.x"`` (all ``n`` cases of one latent) as one block with a dense ``n × n`` factor, which is slow and, in our
runs on the quadratic problem, unstable; the cases are conditionally independent given the globals (the
pseudo-inputs form, Silva & Gramacy 2010, arXiv:1002.4802, Sec. 3), so :func:`sem_guide` combines

* an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (chordal Gaussian) over the global sites, and
* an :class:`~pyro.infer.autoguide.AutoNormal` over the per-case latents: local parameters at full size that
  follow the ``"data"`` plate's subsample (minibatching; the guides build the model's plate with
  :meth:`LatentSEM.create_plates`, so ``Predictive`` without a subsample sees every case),

in one :class:`~pyro.infer.autoguide.AutoGuideList`, both initialised by :meth:`LatentSEM.init_loc_fn`.
"""
from pyro import poutine
from pyro.infer.autoguide import AutoGuideList, AutoNormal

from ..infer.autoguide import AutoStructuredGuide

__all__ = ["sem_guide"]


def sem_guide(model, structure="chordal", local_init_scale=0.1, init_scale=None):
    """An ``AutoGuideList``: ``AutoStructuredGuide`` over the globals, ``AutoNormal`` over the per-case latents.

    :param LatentSEM model: the model. :param str structure: of the global guide (``"chordal"``, ``"mean_field"``
        or ``"full"``). :param float local_init_scale: initial posterior s.d. of each per-case latent.
    :param init_scale: of the global guide (default 0.1).
    :returns: :class:`~pyro.infer.autoguide.AutoGuideList`.

    Example::

        guide = sem_guide(model)
        svi = SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.02}), Trace_ELBO())
        svi.step(df, subsample_size=64)
    """
    local = [f"{x}.x" for x in model.latents]
    guide = AutoGuideList(model, create_plates=model.create_plates)
    guide.append(AutoStructuredGuide(poutine.block(model, hide=local), structure=structure,
                                     init_loc_fn=model.init_loc_fn, init_scale=init_scale))
    guide.append(AutoNormal(poutine.block(model, expose=local), init_loc_fn=model.init_loc_fn,
                            init_scale=local_init_scale))
    return guide
