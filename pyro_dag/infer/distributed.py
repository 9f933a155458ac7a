r"""Data-parallel stochastic variational inference on ``torch.distributed``: the cases are sharded over
processes (one machine or many), each process evaluates the ELBO on its own shard, and the gradients of the
global parameters are all-reduced, so that every process takes the same optimiser step.

**The objective.** With ``R`` processes, process ``r`` holding ``n_r`` of the ``n`` cases and drawing
minibatches of ``B_r`` of them, the full-data ELBO of a :class:`~pyro_dag.DAGDGP` (Perlino, Hamelijnck, Johansen
& Damoulas 2026, arXiv:2607.09645, Eqs. 92-95) splits into one data term per shard and the global terms,
counted once:

.. math::

    \mathcal L = \sum_{r=1}^R \underbrace{\frac{n_r}{B_r}\sum_{i\in B_r} \ell_i}_{D_r} - \mathrm{KL}(q(U)\,\|\,p(U)),

where :math:`\ell_i` is case ``i``'s expected log-likelihood (and, with latent inputs, minus the KL of its
per-case Gaussian :math:`q(h_i)`; Salimbeni, Dutordoir, Hensman & Deisenroth 2019). Each process scales the
sites of its ``"data"`` plate by ``R`` (:class:`DataScale`) and evaluates :math:`-\mathcal L_r = -(R D_r -
\mathrm{KL})`; the processes jointly minimise :math:`\frac1R \sum_r -\mathcal L_r = -\mathcal L`. Hence the
gradient of a *global* parameter (inducing posterior, kernel hyperparameters, inducing inputs, noise, an
amortised encoder) is the mean of the processes' gradients (one ``all_reduce``), and that of a *local*
(per-case) parameter, which lives on its shard only (e.g. the per-case Gaussians of
``DAGDGP(latent_inputs=...)``), is its own process's gradient divided by ``R``. In full batch the result is the
gradient of one process on the union of the shards, up to rounding; with minibatches each process's
:math:`D_r` is an unbiased estimate of its shard's data term, so the sum is unbiased for the full data term.

Pieces:

* :func:`init_process_group` -- join the process group that ``torchrun`` describes (clear error otherwise);
* :func:`shard` / :func:`shard_bounds` -- this process's contiguous block of the cases;
* :class:`DataScale` -- the effect handler scaling the ``"data"`` plate's sites;
* :class:`DataParallel` -- broadcast of the global parameters, gradient reduction, ``loss_and_grads``;
* ``pyro_dag.infer.train(..., distributed=True)`` uses them.

Launch one process per shard with ``torchrun`` (``torchrun --nproc_per_node=2 fit.py``; several machines:
``torchrun --nnodes=N --node_rank=K --nproc_per_node=P --master_addr=HOST --master_port=PORT fit.py``).
"""
import os

import pyro
import torch
import torch.distributed as dist
from pyro.poutine.messenger import Messenger

__all__ = ["DataParallel", "DataScale", "DistributedSetupError", "init_process_group", "require_process_group",
           "shard", "shard_bounds"]

LAUNCH_HINT = ("launch the script with torchrun (e.g. `torchrun --nproc_per_node=2 script.py`, or "
               "`torchrun --nproc_per_node=2 -m pyro_dag.cli fit ...`) and call "
               "pyro_dag.infer.distributed.init_process_group() (or torch.distributed.init_process_group) first")


class DistributedSetupError(RuntimeError):
    """Data-parallel training was asked for without a usable ``torch.distributed`` process group."""


def require_process_group(what="distributed training"):
    """``(rank, world_size)`` of the default process group.

    :raises DistributedSetupError: naming ``what`` and the fix, if ``torch.distributed`` has no process group.
    """
    if not dist.is_available():
        raise DistributedSetupError(f"{what} needs torch.distributed, which this torch build lacks")
    if not dist.is_initialized():
        raise DistributedSetupError(f"{what} needs a torch.distributed process group, and none is initialised: "
                                    f"{LAUNCH_HINT}")
    return dist.get_rank(), dist.get_world_size()


def init_process_group(backend=None, **kwargs):
    """Join the default process group described by ``torchrun``'s environment (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``); a no-op if one is already initialised.

    :param str backend: ``"gloo"`` (CPU) or ``"nccl"`` (GPU); default ``"nccl"`` if ``LOCAL_RANK`` names a
        visible CUDA device and CUDA is available, else ``"gloo"``. With ``"nccl"`` the process's CUDA device is
        set to ``LOCAL_RANK``.
    :param kwargs: passed to ``torch.distributed.init_process_group``.
    :returns: ``(rank, world_size)``.
    :raises DistributedSetupError: if the environment does not describe a process group (not run by torchrun).
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise DistributedSetupError(f"init_process_group: the environment variable {missing[0]} is not set, so "
                                    f"this process was not started by torchrun; {LAUNCH_HINT}")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() and local_rank < torch.cuda.device_count() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend, **kwargs)
    return dist.get_rank(), dist.get_world_size()


def _world(rank, world_size):
    if rank is None or world_size is None:
        r, w = require_process_group("shard (without rank= and world_size=)")
        rank = r if rank is None else rank
        world_size = w if world_size is None else world_size
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise ValueError(f"shard: need 0 <= rank < world_size, got rank={rank!r}, world_size={world_size!r}")
    return rank, world_size


def shard_bounds(n, rank=None, world_size=None):
    """``(lo, hi)``: the cases ``lo:hi`` of ``n`` that process ``rank`` of ``world_size`` holds (contiguous
    blocks; the first ``n mod world_size`` blocks hold one case more, as ``torch.tensor_split``).

    :raises ValueError: if a block would be empty (``n < world_size``).
    """
    rank, world_size = _world(rank, world_size)
    if n < world_size:
        raise ValueError(f"shard: {n} cases cannot be split over {world_size} processes (each needs at least one "
                         "case); use fewer processes")
    size, extra = divmod(n, world_size)
    lo = rank * size + min(rank, extra)
    return lo, lo + size + (1 if rank < extra else 0)


def _num_cases(value):
    if isinstance(value, dict):
        for v in value.values():
            n = _num_cases(v)
            if n is not None:
                return n
        return None
    if value is None:
        return None
    return len(value)


def _slice(value, lo, hi):
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _slice(v, lo, hi) for k, v in value.items()}
    if hasattr(value, "iloc"):  # pandas
        return value.iloc[lo:hi]
    return value[lo:hi]


def shard(*values, rank=None, world_size=None):
    """This process's block of the cases of each of ``values``.

    :param values: the model's arguments, each ``None``, a tensor / array / DataFrame ``[n, ...]`` or a dict of
        them (``inputs = {root: [n, d]}``, ``data = {node: [n, d]}``, a ``mask``); every one must have ``n`` rows.
    :param int rank: default the process group's rank. :param int world_size: default its size.
    :returns: a tuple, one entry per value (a single value if one was given), cases ``lo:hi``
        (:func:`shard_bounds`).
    :raises ValueError: if the values disagree on ``n``, naming the two counts.
    """
    rank, world_size = _world(rank, world_size)
    counts = []
    for i, v in enumerate(values):
        for key, x in (v.items() if isinstance(v, dict) else [(None, v)]):
            if x is not None:
                counts.append((f"values[{i}]" + ("" if key is None else f"[{key!r}]"), len(x)))
    if not counts:
        raise ValueError("shard: nothing to shard (every value is None or empty)")
    n = counts[0][1]
    for label, m in counts:
        if m != n:
            raise ValueError(f"shard: {counts[0][0]} has {n} cases but {label} has {m}; every value must have one "
                             "row per case")
    lo, hi = shard_bounds(n, rank, world_size)
    out = tuple(_slice(v, lo, hi) for v in values)
    return out[0] if len(out) == 1 else out


class DataScale(Messenger):
    """Multiply the log-density scale of every sample site inside the plate ``plate`` by ``factor`` (a Pyro
    effect handler, like ``poutine.scale`` restricted to one plate). Used with ``factor = R`` so that the
    processes' mean loss is the full-data loss (module docstring).

    :param float factor: the multiplier (``world_size``). :param str plate: the plate's name (``"data"``).
    """

    def __init__(self, factor, plate="data"):
        super().__init__()
        self.factor = float(factor)
        self.plate = plate

    def _process_message(self, msg):
        if msg["type"] == "sample" and any(f.name == self.plate for f in msg["cond_indep_stack"]):
            msg["scale"] = self.factor * msg["scale"]


def _is_local(site, plate):
    """A parameter created inside ``plate`` with an ``event_dim`` (so that the plate subsamples it): per-case."""
    event_dim = site["kwargs"].get("event_dim")
    if event_dim is None:
        return False
    value = site["value"]
    for frame in site.get("cond_indep_stack", ()):
        if frame.name == plate and frame.vectorized and value.dim() - event_dim >= -frame.dim:
            return True
    return False


class DataParallel:
    """Data-parallel ELBO gradients over the default ``torch.distributed`` process group (gloo or nccl).

    Each process holds its shard of the cases (:func:`shard`) and the same model and guide. :meth:`setup`
    sorts the parameters into global and local (per-case: created inside the ``plate`` with an ``event_dim``,
    as Pyro's autoguides create local parameters), checks that every process has the same global parameters,
    and broadcasts their values from rank 0; :meth:`loss_and_grads` then leaves in ``.grad`` the gradient of the
    full-data loss ``-L`` (module docstring): the mean over processes for global parameters, the process's own
    (divided by ``R``) for local ones, and returns the full-data loss estimate, equal on every process. Any
    torch optimiser stepped on every process then keeps the global parameters identical (bit for bit: the
    reduced gradients are identical).

    Plain Pyro/torch: one ``elbo.differentiable_loss`` under :class:`DataScale`, ``backward``, one
    ``all_reduce`` of a flat buffer (gradients, presence flags and the loss).

    Example (``torchrun --nproc_per_node=2 fit.py``)::

        rank, world = init_process_group()
        pyro.set_rng_seed(rank)                      # independent draws per process
        inputs, data = shard(inputs, data)           # this process's cases
        dp = DataParallel(DAGELBO(num_particles=4))
        optim = None
        for step in range(1000):
            loss = dp.loss_and_grads(model, guide, inputs, data, subsample_size=256)
            if optim is None:
                optim = torch.optim.Adam([p for _, p in dp.params], lr=0.01)
            optim.step(); optim.zero_grad()

    :param elbo: a Pyro ELBO with ``differentiable_loss`` (e.g. :class:`~pyro_dag.infer.DAGELBO`).
    :param str plate: the name of the model's case plate (``"data"`` for a DAGDGP).
    :param group: a ``torch.distributed`` process group (default: the default group).
    :raises DistributedSetupError: if there is no process group (the fix: run under torchrun).
    """

    def __init__(self, elbo, plate="data", group=None):
        require_process_group("DataParallel")
        if not hasattr(elbo, "differentiable_loss"):
            raise ValueError(f"DataParallel: elbo must be a Pyro ELBO with differentiable_loss, got {elbo!r}")
        self.elbo, self.plate, self.group = elbo, plate, group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.global_params = None   # [(name, unconstrained tensor)], sorted by name
        self.local_params = None

    @property
    def is_setup(self):
        return self.global_params is not None

    @property
    def params(self):
        """``(name, unconstrained tensor)`` of every parameter, global then local (after :meth:`setup`)."""
        return list(self.global_params) + list(self.local_params)

    def scaled_loss(self, model, guide, *args, **kwargs):
        """This process's differentiable loss ``-L_r = -(R D_r - KL)`` (sites of the plate scaled by ``R``)."""
        with DataScale(self.world_size, self.plate):
            return self.elbo.differentiable_loss(model, guide, *args, **kwargs)

    def scaled_elbo(self):
        """An ELBO-like object whose ``differentiable_loss`` / ``loss`` are :meth:`scaled_loss` (for steppers
        that call ``elbo.differentiable_loss``, e.g. :class:`~pyro_dag.infer.training.JointAdam`)."""
        return DataParallelELBO(self)

    def setup(self, model, guide, *args, **kwargs):
        """Trace the parameters (one loss evaluation without gradients), sort them into global and local,
        check that the processes agree on the global ones and broadcast them from rank 0.

        :raises ValueError: if the processes' global parameters differ in names or shapes (e.g. a parameter
            sized by the shard's number of cases that is not declared local), naming the first difference.
        """
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=devices):  # the training's random stream is left untouched
            with torch.no_grad(), pyro.poutine.trace(param_only=True) as capture:
                self.scaled_loss(model, guide, *args, **kwargs)
        glob, local = [], []
        for name, site in capture.trace.nodes.items():
            if site["type"] != "param":
                continue
            p = site["value"].unconstrained()
            (local if _is_local(site, self.plate) else glob).append((name, p))
        glob.sort(key=lambda t: t[0])
        signature = [(name, tuple(p.shape), str(p.dtype)) for name, p in glob]
        everyone = [None] * self.world_size
        dist.all_gather_object(everyone, signature, group=self.group)
        for r, theirs in enumerate(everyone):
            if theirs != signature:
                ours, other = dict((s[0], s[1:]) for s in signature), dict((s[0], s[1:]) for s in theirs)
                diff = sorted(set(ours) ^ set(other)) or [k for k in ours if ours[k] != other[k]]
                raise ValueError(
                    f"DataParallel: process {self.rank} and process {r} disagree on the global parameters (first "
                    f"difference: {diff[0] if diff else '?'!r}: {ours.get(diff[0]) if diff else ''} vs "
                    f"{other.get(diff[0]) if diff else ''}); build the same model and guide on every process, and "
                    f"create per-case parameters inside the {self.plate!r} plate with an event_dim (as Pyro's "
                    "autoguides do)")
        with torch.no_grad():
            for _, p in glob:
                dist.broadcast(p.data, src=0, group=self.group)
        self.global_params, self.local_params = glob, local
        return self

    def reduce_gradients(self, loss):
        """After ``scaled_loss(...).backward()`` on every process: mean the global parameters' gradients over
        the processes (a parameter without a gradient on every process keeps none), divide the local ones by
        ``R``, and return the mean of the processes' ``loss`` (a float: the full-data loss estimate)."""
        if not self.is_setup:
            raise RuntimeError("DataParallel.reduce_gradients: call setup(model, guide, *args) first")
        R = self.world_size
        glob = [p for _, p in self.global_params]
        ref = glob[0] if glob else torch.as_tensor(loss)
        parts, flags = [], []
        for p in glob:
            g = p.grad
            flags.append(0.0 if g is None else 1.0)
            parts.append(torch.zeros_like(p).reshape(-1) if g is None else g.reshape(-1))
        loss_t = torch.as_tensor(loss, dtype=ref.dtype, device=ref.device).detach().reshape(1)
        flags_t = torch.tensor(flags, dtype=ref.dtype, device=ref.device)
        flat = torch.cat(parts + [flags_t, loss_t]) if parts else torch.cat([flags_t, loss_t])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
        flat /= R
        offset = 0
        for i, p in enumerate(glob):
            k = p.numel()
            if flat[-1 - len(glob) + i] > 0:
                p.grad = flat[offset:offset + k].view_as(p).clone()
            else:
                p.grad = None
            offset += k
        for _, p in self.local_params:
            if p.grad is not None:
                p.grad /= R
        return float(flat[-1])

    def loss_and_grads(self, model, guide, *args, **kwargs):
        """The full-data loss estimate (a float, the same on every process), with the gradients of ``-L``
        accumulated in the parameters' ``.grad`` (:meth:`setup` runs on the first call)."""
        if not self.is_setup:
            self.setup(model, guide, *args, **kwargs)
        loss = self.scaled_loss(model, guide, *args, **kwargs)
        loss.backward()
        return self.reduce_gradients(loss.detach())

    def mean(self, value):
        """The mean over the processes of a float (e.g. a validation loss), the same on every process."""
        t = torch.tensor([float(value)], dtype=torch.float64,
                         device=self.global_params[0][1].device if self.global_params else "cpu")
        if dist.get_backend(self.group) == "gloo":
            t = t.cpu()
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return float(t) / self.world_size


class DataParallelELBO:
    def __init__(self, dp):
        self.dp = dp
        self.num_particles = getattr(dp.elbo, "num_particles", None)

    def differentiable_loss(self, model, guide, *args, **kwargs):
        return self.dp.scaled_loss(model, guide, *args, **kwargs)

    def loss(self, model, guide, *args, **kwargs):
        with torch.no_grad():
            return float(self.dp.scaled_loss(model, guide, *args, **kwargs))
