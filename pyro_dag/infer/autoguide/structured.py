"""AutoStructuredGuide: a Gaussian autoguide with a sparse (chordal) precision.

The guide is a Gaussian ``N(m, Λ⁻¹)`` over the model's continuous latent sites, mapped to unconstrained space,
with ``Λ = L Lᵀ`` and ``L`` block-lower-triangular on a chordal pattern in a perfect elimination order, so the
factor has no fill-in (Vandenberghe & Andersen 2015, "Chordal graphs and semidefinite optimization", §4). The
pattern is chosen by ``precision``:

* ``"mean_field"`` -- independent full-covariance Gaussians per block (DAG-VI);
* ``"chordal"`` -- couplings on the chordal completion of the model's structure (DAG-SVI);
* ``"full"`` -- a dense precision.

What a block is depends on the model:

* **DAGDGP models.** Every inducing site ``"{w}.u"`` of a :class:`~pyro_dag.DAGDGP` carries ``infer["dag"]``
  metadata (node, graph, observed nodes); each node's whitened inducing outputs are one block and the pattern is
  the chordal completion of the moralised ancestral graph of the observed nodes. Under
  :class:`~pyro_dag.infer.DAGELBO` the guide publishes ``q(U)`` instead of sampling it (analytic KL and marginal
  ancestral sampling); under ``Trace_ELBO``, ``Predictive`` and friends it samples the ``"{w}.u"`` sites jointly.
  Other continuous latent sites (e.g. kernel hyperparameters with ``PyroSample`` priors) are guided by an
  :class:`~pyro.infer.autoguide.AutoNormal`.
* **Any other Pyro model.** Each continuous latent site (with its plates) is one block, and the pattern is the
  chordal completion of the posterior dependency graph of ``pyro.infer.inspect.get_dependencies`` (which marries
  co-parents). The guide then behaves like :class:`~pyro.infer.autoguide.AutoMultivariateNormal`: a joint
  auxiliary site ``"_{name}_latent"`` and one ``Delta`` site per latent site, in the model's order, broadcast
  under outer plates (vectorised particles, ``Predictive(parallel=True)``).
"""
from .base import InducingDistribution, StructuredGaussianGuide
from .dag_guide import AutoDAGGuide
from .generic_guide import AutoGenericGuide

__all__ = ["AutoStructuredGuide", "InducingDistribution", "StructuredGaussianGuide"]


class AutoStructuredGuide(AutoDAGGuide, AutoGenericGuide):
    """Gaussian autoguide with a chordal precision, for :class:`~pyro_dag.DAGDGP` models and any Pyro model.

    ``q(z) = N(m, Λ⁻¹)`` over the unconstrained latent vector, ``Λ = L Lᵀ`` with ``L`` lower-triangular on the
    chordal pattern of the model's structure in a perfect elimination order (no fill-in). For a
    :class:`~pyro_dag.DAGDGP` the latent vector is the whitened inducing outputs of every GP node and the guide is
    the DAG-SVI posterior of Perlino, Hamelijnck, Johansen & Damoulas (2026), "Deep Gaussian Processes on
    Directed Acyclic Graphs", arXiv:2607.09645, Eqs. (6) and (75) (``precision="mean_field"`` is its DAG-VI,
    Eq. (77)); use it with :class:`~pyro_dag.infer.DAGELBO` (analytic KL, marginal ancestral sampling) or with
    Pyro's ELBOs. On any other model it is a drop-in for
    :class:`~pyro.infer.autoguide.AutoMultivariateNormal` whose precision is sparse where the model's posterior
    dependency graph is.

    :param callable model: a Pyro model: a :class:`~pyro_dag.DAGDGP` (or a model that calls exactly one), or any
        model with continuous latent sites.
    :param str precision: the pattern of the precision: ``"mean_field"``, ``"chordal"`` (default) or ``"full"``
        (``structure=``, its old name, still works with a ``FutureWarning``).
    :param str backend: ``"dense"`` (materialise ``L``), ``"sparse"`` (clique by clique) or ``"auto"`` (sparse
        above 1000 latent dimensions).
    :param str conditioning: the sparse backend's conditional state for DAGELBO's ancestral sampling,
        ``"square_root"`` (default, Potter's update) or ``"factor"`` (block Cholesky updates); the same draws to
        rounding (:class:`~pyro_dag.infer.autoguide.gaussians.SparseChordalPosterior`).
    :param callable init_loc_fn: per-site initialisation of the mean, one of Pyro's ``init_to_*`` strategies
        (:mod:`pyro.infer.autoguide.initialization`) or any ``site -> value`` callable. For a DAGDGP it sets the
        means of the whitened inducing outputs and of the other latent sites. Default: for a DAGDGP
        :func:`~pyro.infer.autoguide.initialization.init_to_feasible` (the inducing outputs start at the prior's
        mean 0, other sites as in ``AutoNormal``); for any other model
        :func:`~pyro.infer.autoguide.initialization.init_to_median`, as in ``AutoMultivariateNormal``.
    :param init_scale: initial posterior standard deviation (unconstrained) of each coordinate: a positive number,
        or a dict ``{node or site name: number}`` (names not given get the prior's scale, 1.0). Default for the
        whitened inducing outputs of a DAGDGP: data-driven, ``(1 + n_w σ_w² / (M_w τ_w²))^{-1/2}`` for each
        observed node with a Gaussian likelihood (:func:`pyro_dag.infer.training.initial_scales`; started at the
        prior's scale, such a node's Monte Carlo noise swamps its narrow posterior and Adam stalls) and 1.0 for the
        others; pass ``init_scale=1.0`` for the prior's scale everywhere. For the sites of any other model: 0.1 (as
        ``AutoMultivariateNormal``).
    :param callable create_plates: as in Pyro's autoguides; a subsampled plate's local sites get parameters at
        the plate's full size, and each call uses the rows of the current subsample. Default for a
        :class:`~pyro_dag.DAGDGP` with latent inputs: its :meth:`~pyro_dag.DAGDGP.create_plates`, so that each call
        draws its own minibatch; otherwise none (Pyro's default).
    :param str name: prefix of the guide's parameters in Pyro's parameter store (default the class name; give
        distinct names to guides that coexist in one parameter store). As with any Pyro autoguide, a guide takes
        the stored value of a name the store already holds; this one warns
        (:class:`~pyro_dag.param_store.ParamStoreCollisionWarning`) at set-up when those values belong to another
        AutoStructuredGuide, which it would otherwise silently start from and share.

    Example::

        guide = AutoStructuredGuide(model, precision="mean_field")
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
    """

    def _setup_layout(self, dag_sites, others, args, kwargs):
        # a model with a DAGDGP gets the DAG layout, any other model the generic one
        if dag_sites:
            AutoDAGGuide._setup_layout(self, dag_sites, others, args, kwargs)
        else:
            AutoGenericGuide._setup_layout(self, dag_sites, others, args, kwargs)
