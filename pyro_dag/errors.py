"""Error types shared by the library's fitted objects (a model and its guide, a :class:`~pyro_dag.infer.LatentMAP`, a
:class:`~pyro_dag.emulation.MultiFidelityEmulator`); the errors of one module's own inputs live in that module
(:class:`~pyro_dag.DAGInputError`, :class:`~pyro_dag.outputs.OutputError`, ...)."""

__all__ = ["NotFittedError"]


class NotFittedError(ValueError, RuntimeError):
    """An object used before it was fitted, or after a fit that did not finish (interrupted, or stopped by an error):
    the message names the object and the fix (fit it, or fit it again). A :class:`ValueError` like the library's other
    errors, and a :class:`RuntimeError` as these errors were before (``except RuntimeError`` still catches it)."""
