"""Thread limits for the library's own training loops.

The problems pyro_dag's loops solve (a few hundred cases, tensors of tens to thousands of entries) are
dominated by per-operation overhead, not by arithmetic: extra intra-op threads only add synchronisation,
and on a small machine with other work running they make each step several times slower. The library's
loops therefore run with one thread by default, inside :func:`limit_threads`, which restores the caller's
settings afterwards. Pass ``num_threads=None`` to a loop to keep the process's settings.
"""
import contextlib
import numbers

import torch

__all__ = ["limit_threads", "DEFAULT_NUM_THREADS"]

#: Threads the library's training loops use unless told otherwise.
DEFAULT_NUM_THREADS = 1


def _check(num_threads):
    if num_threads is None:
        return None
    if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive integer or None (keep the process's settings), "
                         f"got {num_threads!r}")
    return int(num_threads)


@contextlib.contextmanager
def limit_threads(num_threads=DEFAULT_NUM_THREADS):
    """Run the enclosed block with at most ``num_threads`` intra-op threads, then restore the caller's settings.

    Limits torch's intra-op pool (``torch.set_num_threads``) and the BLAS / OpenMP pools of numpy and scipy
    (through ``threadpoolctl``, as scikit-learn does), so that small-tensor loops do not pay for thread
    synchronisation. Nothing is changed when ``num_threads`` is ``None``.

    :param num_threads: a positive integer, or ``None`` to leave the settings alone.

    Example::

        with limit_threads(1):
            run_many_small_steps()
    """
    num_threads = _check(num_threads)
    if num_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - threadpoolctl is a dependency; keep torch's limit regardless
            pass
        else:
            stack.enter_context(threadpool_limits(limits=num_threads))
        torch.set_num_threads(num_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)
