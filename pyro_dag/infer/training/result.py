"""What a training run returns: :class:`TrainResult`, one type for every recipe of
:func:`~pyro_dag.infer.train` (stochastic variational inference and latent-MAP fitting alike)."""
from dataclasses import dataclass, field

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    :ivar list losses: the loss (negative ELBO estimate, a float) of every step run, warm-start steps included;
        each is evaluated at the parameters before the step.
    :ivar list pretrain_losses: the summed node-wise losses of the pretraining steps.
    :ivar list pretrained_nodes: the nodes fitted alone first.
    :ivar list validation: ``(step, validation loss)`` pairs.
    :ivar best_step: the step of the lowest validation loss (``None`` without validation).
    :ivar best_validation_loss: that loss.
    :ivar stopped: ``None`` (all steps ran), ``"early_stopping"``, ``"callback"`` or ``"collapsed"`` (every GP
        node was fitted exactly, so no step was needed).
    :ivar dict settings: the resolved recipe (ELBO, learning rate, natural-gradient phase, freezing, ...).
    :ivar float seconds: wall-clock seconds of the steps run in this call (pretraining excluded).
    :ivar float warm_start_seconds: of which in the mean-field warm start.
    :ivar int resumed_from: the step the run resumed after (``0`` for a fresh run).
    :ivar natural_gradient_stopped: the step at which the divergence guard stopped the natural-gradient phase
        (:class:`~pyro_dag.infer.training.guard.NaturalGradientGuard`), else ``None``.
    :ivar list collapsed_nodes: the nodes fitted exactly on their collapsed bound before the steps
        (:func:`~pyro_dag.infer.training.fit_collapsed`) and held through them; when they are all the GP nodes the
        steps are skipped (``stopped == "collapsed"``).
    :ivar dict collapsed_losses: ``{node: [negative collapsed bound per L-BFGS evaluation]}``.
    :ivar float collapse_seconds: wall-clock seconds of that fit.
    :ivar dict started_nodes: ``{node: "hidden" or "child"}``, the nodes started at the shallow fit
        (:func:`~pyro_dag.infer.training.start_hidden_nodes`).
    :ivar list rollbacks: ``(step, back to step, learning-rate factor)`` of each rollback of a diverging Adam phase
        (:class:`~pyro_dag.infer.training.rollback.DivergenceRollback`).
    :ivar dict fallback: when the run was trained a second time without the hidden-node start (``fallback_start``):
        ``{"kept": "start" or "no start", "start_loss": ..., "no_start_loss": ..., "nodes": [...]}`` (the final losses
        are means of the last 50 steps; ``nodes`` those whose noise took the signal); else ``None``. :attr:`losses`
        are the kept run's.
    :ivar dict candidates: when the run took candidate starts (:mod:`~pyro_dag.infer.training.candidates`):
        ``{"losses": [mean loss of each candidate's last 50 steps], "kept": index, "steps": R}``, else ``None``;
        :attr:`losses` are the kept candidate's (its ``R`` steps, then the rest of the run).
    :ivar int noise_steps: the number of noise steps that lowered a node's noise
        (:class:`~pyro_dag.infer.training.noise_step.NoiseStep`).
    :ivar restored_step: the last step of the window whose parameters the run ended with because the run ended worse
        than that window (:class:`~pyro_dag.infer.training.best.BestIterate`), else ``None``.
    """

    losses: list = field(default_factory=list)
    pretrain_losses: list = field(default_factory=list)
    pretrained_nodes: list = field(default_factory=list)
    validation: list = field(default_factory=list)
    best_step: int = None
    best_validation_loss: float = None
    stopped: str = None
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0
    warm_start_seconds: float = 0.0
    resumed_from: int = 0
    natural_gradient_stopped: int = None
    collapsed_nodes: list = field(default_factory=list)
    collapsed_losses: dict = field(default_factory=dict)
    collapse_seconds: float = 0.0
    started_nodes: dict = field(default_factory=dict)
    restored_step: int = None
    fallback: dict = None
    rollbacks: list = field(default_factory=list)
    noise_steps: int = 0
    candidates: dict = None

    @property
    def num_steps(self):
        """Steps run (warm start included)."""
        return len(self.losses)

    @property
    def final_loss(self):
        """The last step's loss, or with no step run (``stopped == "collapsed"``) the summed negative collapsed
        bound, which is then the exact negative ELBO; ``nan`` if neither exists."""
        if self.losses:
            return self.losses[-1]
        ends = [v[-1] for v in self.collapsed_losses.values() if v]
        return sum(ends) if ends else float("nan")
