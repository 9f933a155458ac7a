"""Diagnostics: ArviZ conversion of DAG-DGP posteriors and of MCMC runs (standard ArviZ objects out).

:func:`to_inference_data` works with ArviZ 0.x (``az.from_dict(posterior=...)``) and 1.x
(``az.from_dict({"posterior": ...})``), so the same code runs on Python 3.11 (ArviZ 0.23) and on newer
Pythons (ArviZ 1.x).
"""
import numpy as np
import torch

__all__ = ["to_inference_data"]


def _arviz_from_dict(posterior, observed=None):
    import arviz as az

    major = int(az.__version__.split(".")[0])
    if major >= 1:  # ArviZ 1.x: one dict of groups
        groups = {"posterior": posterior}
        if observed:
            groups["observed_data"] = observed
        return az.from_dict(groups)
    return az.from_dict(posterior=posterior, observed_data=observed or None)


def _numpy(x):
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def to_inference_data(model=None, guide=None, inputs=None, nodes=None, num_samples=500, mcmc=None, data=None):
    """Posterior samples as an ArviZ ``InferenceData``.

    Two sources:

    * a trained variational posterior: ``to_inference_data(model, guide, inputs)`` draws node values with
      :meth:`pyro_dag.DAGDGP.predict` (variables ``"{w}.f"`` of shape ``[chain=1, draw, n, d_w]``);
    * an MCMC run: ``to_inference_data(mcmc=mcmc)`` takes ``mcmc.get_samples(group_by_chain=True)``.

    :param model: a :class:`~pyro_dag.DAGDGP`. :param guide: its trained guide.
    :param dict inputs: root design matrices at which to draw node values.
    :param list nodes: nodes to include (default all GP nodes).
    :param int num_samples: draws from the variational posterior.
    :param mcmc: a :class:`pyro.infer.MCMC` that has been run.
    :param dict data: optional observations ``{node: [n, d]}`` stored as ``observed_data``.
    """
    if mcmc is not None:
        posterior = {k: _numpy(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    else:
        if model is None or guide is None or inputs is None:
            raise ValueError("pass model, guide and inputs (a variational posterior) or mcmc=... (an MCMC run)")
        pred = model.predict(guide, inputs, nodes=nodes, num_samples=num_samples)
        posterior = {f"{w}.f": _numpy(p.samples)[None] for w, p in pred.items()}
    observed = {f"{w}.y": _numpy(v) for w, v in (data or {}).items()}
    return _arviz_from_dict(posterior, observed)
