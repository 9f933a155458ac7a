"""Prediction's side of the model: the result type :data:`NodePrediction` and the methods
:meth:`Prediction.predict` and :meth:`Prediction.infer_latent_inputs`, which hand off to
:mod:`pyro_dag.infer.prediction` (see :mod:`pyro_dag.dgp.handoff`). A mixin of :class:`~pyro_dag.dgp.DAGDGP`
(Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Prop. 9).
"""
from collections import namedtuple

import torch

from . import handoff

__all__ = ["NodePrediction", "Prediction"]


NodePrediction = namedtuple("NodePrediction", ["samples", "mean", "variance", "loc", "var", "y_mean", "y_variance"])
NodePrediction.__doc__ = """Posterior prediction for one node (see :meth:`DAGDGP.predict`).

* ``samples`` ``[S, n, d]``: draws of the latent node values ``F_w``;
* ``mean``, ``variance`` ``[n, d]``: their mean and variance (law of total variance over the S draws);
* ``loc``, ``var`` ``[S, n, d]``: the Gaussian conditional of each draw given its sampled ancestors
  (the predictive is the equally weighted mixture of these);
* ``y_mean``, ``y_variance`` ``[n, d]``: moments of a new observation (likelihood noise added): for a Bernoulli
  node ``y_mean`` is the probability of ``y = 1``, for a Student-t node its location (with an infinite
  ``y_variance`` when ``1 < ν ≤ 2``); ``None`` where the observation has no mean (Student-t with ``ν ≤ 1``) or the
  likelihood gives no moments (:meth:`~pyro_dag.gp.Likelihood.predictive_moments`).
"""


class Prediction:
    """:meth:`predict` and :meth:`infer_latent_inputs` of a :class:`~pyro_dag.dgp.DAGDGP`."""

    #: Default ``num_samples × batch_size × Σ_w d_w M_w`` bound of :meth:`predict`'s working set (elements).
    predict_chunk_elements = 2 ** 21

    #: :meth:`predict` under a posterior with independent blocks (mean field; a chordal guide after exact fits):
    #: each one-output node's predictive variance through a factor of ``I - S`` computed once
    #: (:mod:`pyro_dag.infer.factored_prediction`, ``O(M r)`` per sample and case instead of ``O(M²)``), its
    #: eigenvalues dropped while they change no variance by more than this fraction of the node's noise variance;
    #: ``None``: the reference path (a triangular solve per sample and case).
    predict_factored_tolerance = 1e-3

    @torch.no_grad()
    def predict(self, guide, inputs, data=None, nodes=None, num_samples=200, batch_size=None, mask=None,
                latent_steps=300, latent_lr=0.05, latent_particles=16):
        """Posterior predictive of node values at new inputs, also for nodes that are never observed.

        With an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (alone or as a part of an
        ``AutoGuideList``) this runs marginal ancestral sampling against its ``q(U)`` (exact samples from the
        induced ``q(F)``; Perlino et al. 2026, arXiv:2607.09645, Prop. 9 and Algorithms 1-3 of App. E.3); with any
        other guide it draws ``U`` from the guide and propagates (plain ancestral sampling). Predictions propagate
        from the roots through the DAG.

        **Latent inputs.** For a model with ``latent_inputs``, the per-case latent values of the new cases are
        inferred from ``data``, the nodes observed for them (:meth:`infer_latent_inputs`: a short fit of
        ``q(h_i) = N(μ_i, diag σ_i²)`` with the model and ``q(U)`` frozen); a case with nothing observed keeps the
        prior ``N(0, I)``, as do all cases when ``data`` is ``None``. With an amortised guide
        (:class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`, or any ``AutoGuideList`` holding an
        :class:`~pyro_dag.infer.autoguide.AutoLatentEncoder`) ``q(h_i)`` is the encoder's output instead (one pass,
        no fit). Each sample then draws ``h`` from ``q(h)`` and propagates. ``data`` is used for nothing else (an
        observed node's prediction is still the model's).

        The cases are processed in chunks of ``batch_size``, so that memory beyond the returned tensors stays
        bounded whatever ``n``. The standard-normal draws are made for all cases first, in the same order as in
        one pass, so the result (for a given seed) does not depend on ``batch_size`` (with latent inputs inferred
        from ``data``, the fit of ``q(h)`` is also done chunk by chunk, and its random draws depend on it).

        :param guide: a trained guide. :param dict inputs: ``{root: [n, d_r]}`` (observed roots only).
        :param dict data: ``{node: [n, d_w]}`` observations of the new cases (NaN = missing), used only to infer
            latent inputs; ``None``: the latent inputs keep their prior. Refused for a model without latent inputs.
        :param list nodes: nodes to return (default: all GP nodes; one name, a string, is that node); latent
            inputs may be named too (their samples are the draws of ``h``, their ``loc`` / ``var`` the moments of
            ``q(h)``).
        :param int num_samples: ``S``.
        :param int batch_size: cases per chunk (default: as many as keep ``S × batch_size × Σ_w d_w M_w``
            below :attr:`predict_chunk_elements`, i.e. a working set of about 16 MiB per intermediate in float64).
        :param dict mask: optional ``{node: bool [n, d_w]}`` for ``data`` (True = observed).
        :param int latent_steps: Adam steps of the latent fit. :param float latent_lr: its learning rate.
        :param int latent_particles: samples per case and step of the latent fit.
        :returns: ``{node: NodePrediction}`` with samples ``[S, n, d_w]``.

        With a :class:`~pyro_dag.infer.LatentMAP` as ``guide``: its linked-GP prediction
        (:meth:`~pyro_dag.infer.LatentMAP.predict`: moments in closed form, ancestral samples).
        """
        if isinstance(nodes, str):  # one node's name is that node (list("leaf_c") would be its letters)
            nodes = [nodes]
        return handoff.prediction("predict")(self, guide, inputs, data, nodes, num_samples, batch_size, mask,
                                              latent_steps, latent_lr, latent_particles)

    @torch.no_grad()
    def infer_latent_inputs(self, guide, inputs, data=None, mask=None, num_steps=300, lr=0.05, num_particles=16,
                            batch_size=None):
        """Infer the latent inputs of (new) cases from the nodes observed for them, with the model and the guide's
        ``q(U)`` frozen.

        Fits ``q(h_i) = N(μ_i, diag σ_i²)`` per case by maximising the cases' ELBO
        ``Σ_i E_{q(h_i) q(U) p(F | U, h_i)}[Σ_w log p(y_w^{(i)} | F_w^{(i)})] - KL(q(h_i) || N(0, I))`` with Adam,
        starting from the prior, ``num_particles`` reparameterised draws of ``h`` per case and step (the per-case
        latent layer of Salimbeni, Dutordoir, Hensman & Deisenroth 2019, "Deep Gaussian processes with
        importance-weighted variational inference", ICML, used for confounders by Perlino et al. 2026,
        arXiv:2607.09645, Sec. 6 and App. E.3.4). The expected log-likelihood is evaluated as in
        :class:`~pyro_dag.infer.DAGELBO` (marginal ancestral sampling, closed form at each observed node) for an
        :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`; for other guides ``num_particles`` draws of ``U``
        from the guide are made once and held fixed during the fit. Cases with nothing observed (and all cases
        when ``data`` is ``None``) keep the prior ``N(0, I)``. The cases are fitted independently, in chunks of
        ``batch_size``.

        :param guide: the trained guide. :param dict inputs: ``{root: [n, d_r]}``.
        :param dict data: ``{node: [n, d_w]}``, NaN = missing. :param dict mask: optional, as in :meth:`forward`.
        :param int num_steps: Adam steps. :param float lr: Adam's learning rate.
        :param int num_particles: draws of ``h`` per case and step.
        :param int batch_size: cases per chunk (default as in :meth:`predict`).
        :returns: ``{h: (loc [n, d_h], scale [n, d_h])}``, the moments of ``q(h)``.
        """
        return handoff.prediction("infer_latent_inputs")(self, guide, inputs, data, mask, num_steps, lr,
                                                          num_particles, batch_size)
