"""Progress of the defaults' set-up: one tqdm bar per stage, shown only when the stage runs longer than a few seconds.

The set-up that :class:`~pyro_dag.DAGDGP` and :func:`~pyro_dag.infer.train` do before the first step (pilot exact GPs
of the noise rule, exact fits of the nodes with observed inputs, the hidden-node start) grows with the graph; on a
graph of hundreds of nodes it takes seconds to minutes. Each stage reports its nodes through :func:`setup_progress`,
whose bar appears after :data:`SETUP_PROGRESS_DELAY` seconds (tqdm's ``delay``), so small models print nothing.
``with quiet_setup():`` turns the bars off (``train(..., progress=False)`` does). The stages after training that
take minutes on many rows (:meth:`~pyro_dag.DAGDGP.predict`, the baselines of ``pyro-dag fit --csv``) report
through :func:`stage_progress`, turned off by the same block (``pyro-dag fit --no-progress`` enters it).
"""
import contextlib
import contextvars

__all__ = ["SETUP_PROGRESS_DELAY", "ScaledDefaultWarning", "quiet_setup", "setup_progress", "stage_progress"]

#: Seconds a set-up stage runs before its progress bar appears.
SETUP_PROGRESS_DELAY = 3.0

_QUIET = contextvars.ContextVar("pyro_dag_quiet_setup", default=False)


@contextlib.contextmanager
def quiet_setup(quiet=True):
    """Within the block, set-up stages show no progress bar (``quiet=False``: they do)."""
    token = _QUIET.set(bool(quiet))
    try:
        yield
    finally:
        _QUIET.reset(token)


def setup_progress(total, desc):
    """A tqdm bar over ``total`` items of the set-up stage ``desc`` (a context manager; ``bar.update(k)``), shown
    after :data:`SETUP_PROGRESS_DELAY` seconds unless inside :func:`quiet_setup`."""
    return stage_progress(total, f"set-up: {desc}")


def stage_progress(total, desc, delay=None, unit="it"):
    """A tqdm bar (on stderr) over ``total`` items of a stage ``desc`` after training (e.g. prediction, the
    baselines of ``pyro-dag fit --csv``), shown after ``delay`` seconds unless inside :func:`quiet_setup`; a
    context manager, ``bar.update(k)``. A stage of a few long items (one exact GP fit per node) passes
    ``delay=0``: a delayed bar would first show after the first item (default :data:`SETUP_PROGRESS_DELAY`)."""
    from tqdm.auto import tqdm

    delay = SETUP_PROGRESS_DELAY if delay is None else delay
    return tqdm(total=total, desc=desc, delay=delay, disable=_QUIET.get(), leave=False, mininterval=0.5, unit=unit)


class ScaledDefaultWarning(UserWarning):
    """A default that does not scale to this problem's size was replaced by one that does; the message says which
    and what to pass to choose otherwise."""
