"""Shared helpers of the structure-learning benchmarks.

Protocols of Zinage 2026, *SVI-DAG*, arXiv:2608.04930, §4 and App. C-E; metrics as recommended by Wang, Wicker &
Kwiatkowska, *Tractable Uncertainty for Structure Learning*, ICML 2022.

* one thread, one core: :func:`single_thread` sets the thread variables (before numpy/torch/jax are imported by
  the caller) and pins the process to one CPU, so every method is timed on the same single core;
* peers: DiBS (``dibs-lib``: MarginalDiBS + BGe for linear data, JointDiBS + a dense nonlinear Gaussian network
  for nonlinear data), GES (BIC score) and PC (Fisher-z, alpha = 0.05) from ``causal-learn``; all optional
  (``pip install -e .[bench]``);
* pyro_dag: :func:`run_pyro_dag` calls ``pyro_dag.structure.fit``;
* scoring: every method is turned into ``[k, p, p]`` DAG samples (plus weights for DiBS's mixture) and scored
  with :mod:`pyro_dag.metrics` at the DAG, CPDAG and skeleton levels;
* results: JSON under ``benchmarks/results/`` (merged per (cell, seed, method) so a run can be resumed or a
  method added later) and a table in this author's section of ``benchmarks/README.md``.

Adjacency convention everywhere: ``A[i, j] = 1`` means ``i -> j`` (DiBS uses the same; causal-learn graphs are
converted by :func:`causallearn_to_cpdag`).
"""
import json
import os
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")


def single_thread(cpu=None):
    """Set every thread pool to one thread and (optionally) pin this process to one CPU core.

    Call before importing numpy/torch/jax. Returns the core the process is pinned to (or ``None``).
    """
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TQDM_DISABLE", "1")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu)})
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    return cpu


def load_avg():
    """1-minute load average of the machine (recorded with every timing)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


# ----------------------------------------------------------------------------------------------------------
# conversions
# ----------------------------------------------------------------------------------------------------------
def causallearn_to_cpdag(graph):
    """causal-learn ``GeneralGraph.graph`` (``[p, p]`` endpoint codes) to a PDAG with ``C[i, j] = 1`` for ``i -> j``
    and ``C[i, j] = C[j, i] = 1`` for ``i - j``. causal-learn encodes ``i -> j`` as ``g[j, i] = 1, g[i, j] = -1`` and
    ``i - j`` as ``g[i, j] = g[j, i] = -1``; a bidirected ``i <-> j`` (``g[i, j] = g[j, i] = 1``, a PC conflict) is
    treated as undirected."""
    import numpy as np

    g = np.asarray(graph)
    p = g.shape[0]
    c = np.zeros((p, p), dtype=np.int8)
    for i in range(p):
        for j in range(p):
            if i == j:
                continue
            if g[i, j] == -1 and g[j, i] == 1:
                c[i, j] = 1
            elif g[i, j] != 0 and g[j, i] != 0 and not (g[i, j] == 1 and g[j, i] == -1):
                c[i, j] = c[j, i] = 1
    return c


def pdag_to_dag_samples(c, k, rng):
    """``k`` DAGs in the class of PDAG ``c`` (random consistent extensions). If ``c`` has no consistent extension
    (PC can return such graphs), fall back to: break directed cycles by making a random edge of each cycle
    undirected, then orient all undirected edges along a random topological order of the directed part (may add
    v-structures). Returns ``(samples [k, p, p], used_fallback)``."""
    import numpy as np

    from pyro_dag.metrics import cpdag_to_dags, is_dag

    try:
        return cpdag_to_dags(c, num_samples=k, seed=rng), False
    except ValueError:
        pass
    c = np.array(c, dtype=np.int8)
    d = c * (1 - c.T)
    u = c * c.T
    while not is_dag(d):
        import networkx as nx

        cyc = nx.find_cycle(nx.from_numpy_array(d, create_using=nx.DiGraph))
        i, j = cyc[rng.integers(len(cyc))][:2]
        d[i, j] = 0
        u[i, j] = u[j, i] = 1
    import networkx as nx

    out = np.zeros((k,) + c.shape, dtype=np.int8)
    for n in range(k):
        g = nx.from_numpy_array(d, create_using=nx.DiGraph)
        # random topological order: repeatedly pick a random source
        indeg = d.sum(0).astype(int)
        alive = np.ones(c.shape[0], bool)
        pos = np.zeros(c.shape[0], int)
        for t in range(c.shape[0]):
            cand = np.nonzero(alive & (indeg == 0))[0]
            x = cand[rng.integers(len(cand))]
            pos[x] = t
            alive[x] = False
            indeg -= d[x]
        del g
        und = np.triu(u, 1)
        dag = d.copy()
        for i, j in zip(*np.nonzero(und)):
            if pos[i] < pos[j]:
                dag[i, j] = 1
            else:
                dag[j, i] = 1
        out[n] = dag
    return out, True


# ----------------------------------------------------------------------------------------------------------
# scoring
# ----------------------------------------------------------------------------------------------------------
def score(samples, truth, weights=None, levels=("dag", "cpdag")):
    """All metrics at the requested levels, plus SVI-DAG's conventions for side-by-side tables.

    DAG level: E-SHD with reversal cost 1 (``e_shd``) and 2 (``e_shd_rc2``, SVI-DAG's DAG code). ``cpdag``
    level: our CPDAG-mark metrics. ``svidag_cpdag`` (only with ``"cpdag"``): SVI-DAG's "CPDAG" table convention
    (E-SHD on CPDAG marks, reversal 1; Brier/AUROC on the skeleton with ``max(P_ij, P_ji)``; skeleton F1).
    """
    import numpy as np

    from pyro_dag.metrics import auroc, brier, expected_f1, expected_shd, is_dag, structure_metrics

    out = {}
    if "dag" in levels:
        m = structure_metrics(samples, truth, level="dag", reversal_cost=1, weights=weights)
        m["e_shd_rc2"] = expected_shd(samples, truth, level="dag", reversal_cost=2, weights=weights)
        out["dag"] = m
    if "cpdag" in levels and bool(np.all(is_dag(samples))) and bool(is_dag(truth)):
        out["cpdag"] = structure_metrics(samples, truth, level="cpdag", reversal_cost=1, weights=weights)
        out["svidag_cpdag"] = {
            "brier": brier(samples, truth, level="skeleton", weights=weights, symmetrize="max"),
            "e_shd": expected_shd(samples, truth, level="cpdag", reversal_cost=1, weights=weights),
            "e_f1": expected_f1(samples, truth, level="skeleton", weights=weights),
            "auroc": auroc(samples, truth, level="skeleton", weights=weights, symmetrize="max"),
        }
    if "skeleton" in levels:
        out["skeleton"] = structure_metrics(samples, truth, level="skeleton", weights=weights)
    return out


# ----------------------------------------------------------------------------------------------------------
# methods: each returns dict(samples=[k,p,p] int8, weights=None|[k], time_s=float, info=dict)
# ----------------------------------------------------------------------------------------------------------
def run_ges(x, k, seed):
    import numpy as np
    from causallearn.search.ScoreBased.GES import ges

    t0 = time.perf_counter()
    rec = ges(np.asarray(x, dtype=np.float64), score_func="local_score_BIC")
    c = causallearn_to_cpdag(rec["G"].graph)
    t = time.perf_counter() - t0
    samples, fb = pdag_to_dag_samples(c, k, np.random.default_rng(seed))
    return {"samples": samples, "weights": None, "time_s": t, "info": {"score": "BIC", "fallback": fb,
                                                                        "edges_in_cpdag": int(np.triu(c | c.T).sum())}}


def run_pc(x, k, seed, alpha=0.05):
    import numpy as np
    from causallearn.search.ConstraintBased.PC import pc

    t0 = time.perf_counter()
    cg = pc(np.asarray(x, dtype=np.float64), alpha=alpha, indep_test="fisherz", show_progress=False)
    c = causallearn_to_cpdag(cg.G.graph)
    t = time.perf_counter() - t0
    samples, fb = pdag_to_dag_samples(c, k, np.random.default_rng(seed))
    return {"samples": samples, "weights": None, "time_s": t, "info": {"test": "fisherz", "alpha": alpha,
                                                                        "fallback": fb}}


def run_dibs(x, likelihood, seed, n_particles=20, steps=1000, edges_per_node=2, hidden=(10,), obs_noise=0.1,
             n_grad_mc_samples=128):
    """DiBS (Lorch et al. 2021) with the settings of SVI-DAG (arXiv:2608.04930, App. E): MarginalDiBS + BGe (linear)
    or JointDiBS + DenseNonlinearGaussian (nonlinear), ER graph prior, 20 particles; defaults of dibs-lib
    otherwise. Returns the particles with DiBS's *mixture* weights (weights proportional to the unnormalised
    posterior of each particle's graph, as ``get_mixture``; cyclic particles dropped, as dibs.metrics
    does)."""
    import jax.random as jr
    import numpy as np
    from dibs.inference import JointDiBS, MarginalDiBS
    from dibs.models import BGe, DenseNonlinearGaussian, ErdosReniDAGDistribution

    p = x.shape[1]
    xj = np.asarray(x, dtype=np.float32)
    t0 = time.perf_counter()
    key = jr.PRNGKey(seed)
    graph = ErdosReniDAGDistribution(n_vars=p, n_edges_per_node=edges_per_node)
    if likelihood == "linear":
        model = BGe(n_vars=p)
        dibs = MarginalDiBS(x=xj, graph_model=graph, likelihood_model=model, n_grad_mc_samples=n_grad_mc_samples)
        gs = dibs.sample(key=key, n_particles=n_particles, steps=steps)
        dist = dibs.get_mixture(gs)
    else:
        model = DenseNonlinearGaussian(n_vars=p, hidden_layers=hidden, obs_noise=obs_noise)
        dibs = JointDiBS(x=xj, graph_model=graph, likelihood_model=model, n_grad_mc_samples=n_grad_mc_samples)
        gs, thetas = dibs.sample(key=key, n_particles=n_particles, steps=steps)
        dist = dibs.get_mixture(gs, thetas)
    g = np.asarray(dist.g).astype(np.int8)
    logp = np.asarray(dist.logp, dtype=np.float64)
    t = time.perf_counter() - t0
    from pyro_dag.metrics import is_dag

    acyc = np.asarray(is_dag(g))
    w = np.exp(logp - logp.max())
    info = {"n_particles": n_particles, "steps": steps, "cyclic_particles": int((~acyc).sum()),
            "n_grad_mc_samples": n_grad_mc_samples,
            "model": "BGe" if likelihood == "linear" else f"DenseNonlinearGaussian{hidden}, obs_noise={obs_noise}",
            "edges_per_node_prior": edges_per_node}
    if not acyc.any():
        info["note"] = "all particles cyclic: scored unweighted at DAG level only"
        return {"samples": g, "weights": None, "time_s": t, "info": info}
    w = w[acyc]
    if not np.all(np.isfinite(w)) or w.sum() <= 0:
        info["note"] = "mixture log-weights not finite: particles scored with uniform weights"
        return {"samples": g[acyc], "weights": None, "time_s": t, "info": info}
    return {"samples": g[acyc], "weights": w / w.sum(), "time_s": t, "info": info}


def run_pyro_dag(x, likelihood, seed, k=1000, **fit_kwargs):
    """``pyro_dag.structure.fit`` (SVI-DAG, arXiv:2608.04930) followed by ``posterior.sample(k)``; the progress bar
    is turned off when ``fit`` accepts ``progress``/``progress_bar``. Returns ``None`` if ``fit`` is not
    available yet."""
    import inspect

    import numpy as np
    import torch

    try:
        from pyro_dag.structure import fit
    except ImportError:
        return None
    sig = inspect.signature(fit).parameters
    for name in ("progress", "progress_bar"):
        if name in sig:
            fit_kwargs.setdefault(name, False)
    # None means "fit's default" for these two; other keys pass through (e.g. expected_parents=None is meaningful)
    fit_kwargs = {kk: v for kk, v in fit_kwargs.items() if not (v is None and kk in ("num_steps", "num_particles"))}
    data = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    t0 = time.perf_counter()
    post = fit(data, likelihood=likelihood, seed=seed, **fit_kwargs)
    samples = post.sample(k)
    t = time.perf_counter() - t0
    samples = np.asarray(torch.as_tensor(samples).detach().cpu()).astype(np.int8)
    probs = np.asarray(torch.as_tensor(post.edge_probs()).detach().cpu(), dtype=np.float64)
    return {"samples": samples, "weights": None, "time_s": t, "edge_probs": probs,
            "info": {"fit_kwargs": {kk: v for kk, v in fit_kwargs.items()}, "k": k}}


def run_exact(x, likelihood, seed, k=1000, **kwargs):
    """``pyro_dag.structure.exact_posterior`` (the exact posterior of the model ``fit`` approximates, for collapsed
    likelihoods and p ≤ 20) followed by ``sample(k)`` exact DAG samples."""
    import numpy as np

    from pyro_dag.structure import exact_posterior

    t0 = time.perf_counter()
    post = exact_posterior(np.asarray(x, dtype=float), likelihood=likelihood, **kwargs)
    samples = post.sample(k, seed=seed)
    t = time.perf_counter() - t0
    return {"samples": np.asarray(samples).astype(np.int8), "weights": None, "time_s": t,
            "edge_probs": post.edge_probs().numpy(), "info": {"kwargs": kwargs, "k": k,
                                                              "log_evidence": post.log_evidence}}


# ----------------------------------------------------------------------------------------------------------
# results files and README section
# ----------------------------------------------------------------------------------------------------------
# What each results file held when this process first read it: entries that still equal it are not this
# process's own, and the file's (possibly newer) version of them wins in save_results.
_SNAPSHOT = {}


def _fingerprints(runs):
    return {(key, method): json.dumps(value, sort_keys=True, default=_json_default)
            for key, methods in runs.items() for method, value in methods.items()}


def load_results(name):
    path = os.path.join(RESULTS, name)
    if os.path.exists(path):
        with open(path) as f:
            res = json.load(f)
    else:
        res = {"runs": {}}
    _SNAPSHOT.setdefault(name, _fingerprints(res.get("runs", {})))
    return res


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return float(o)


def save_results(name, res):
    """Merge ``res`` with the JSON file under a lock and write it: entries ``runs[key][method]`` this process
    computed (changed since it first read the file) win, at every save; every other entry is taken from the file, so entries written
    meanwhile by another process are added to (or replace the stale copies in) ``res`` in place (the dicts inside
    ``res["runs"]`` keep their identity, so callers may hold references to them). This lets several benchmark
    processes write the same file at the same time. (Until 2026-11-29 the stale copies this process had read won,
    which silently reverted another process's fresh entries.)"""
    import fcntl
    import tempfile

    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(os.path.join(tempfile.gettempdir(), f"pyro_dag_{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        snapshot = _SNAPSHOT.get(name, {})
        disk = load_results(name)
        runs = res.setdefault("runs", {})
        for key, methods in disk.get("runs", {}).items():
            mem = runs.setdefault(key, {})
            for method, value in methods.items():
                mine = mem.get(method)
                if mine is None or snapshot.get((key, method)) == json.dumps(mine, sort_keys=True,
                                                                             default=_json_default):
                    mem[method] = value
        out = dict(disk)
        out.update(res)
        tmp = path + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True, default=_json_default)
        os.replace(tmp, path)


def environment():
    import platform

    import numpy
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
           "cpu_count": os.cpu_count(), "machine": platform.machine(), "argv": " ".join(sys.argv)}
    for mod in ("pyro", "jax", "dibs", "causallearn"):
        try:
            m = __import__(mod)
            env[mod] = getattr(m, "__version__", "?")
        except ImportError:
            pass
    return env


def mean_se(values):
    import numpy as np

    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) == 0:
        return float("nan"), float("nan"), 0
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    return float(v.mean()), float(se), len(v)


def fmt(m, se, scale=1.0, digits=3):
    import math

    if m != m:
        return "–"
    if se != se:
        return f"{m * scale:.{digits}f}"
    return f"{m * scale:.{digits}f} ± {se * scale:.{digits}f}"


def insert_block(doc, key, text):
    """Return ``doc`` (README text) with the block between ``<!-- structure:{key}:begin -->`` and
    ``<!-- structure:{key}:end -->`` replaced by ``text`` (appended if absent), inside the structure section
    delimited by ``<!-- structure:begin -->`` / ``<!-- structure:end -->`` (created at the end if absent)."""
    sec_begin, sec_end = "<!-- structure:begin -->", "<!-- structure:end -->"
    begin, end = f"<!-- structure:{key}:begin -->", f"<!-- structure:{key}:end -->"
    if sec_begin not in doc:
        doc = doc.rstrip("\n") + ("\n\n" if doc else "") + (
            f"{sec_begin}\n## Bayesian structure learning\n\n"
            "Generated by `benchmarks/structure_*.py` from `benchmarks/results/structure_*.json`; do not edit by hand.\n"
            "Adjacency `A[i, j] = 1` means `i -> j`. Metric definitions: `pyro_dag/metrics/structure.py`.\n\n"
            f"{sec_end}\n")
    s0, s1 = doc.index(sec_begin), doc.index(sec_end)
    section = doc[s0:s1]
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in section:
        b0, b1 = section.index(begin), section.index(end) + len(end)
        section = section[:b0] + block + section[b1:]
    else:
        section = section.rstrip("\n") + "\n\n" + block + "\n\n"
    return doc[:s0] + section + doc[s1:]


def write_readme_block(key, text):
    """Regenerate the whole ``benchmarks/README.md`` from ``benchmarks/results/*.json`` (``benchmarks/report.py``).

    Scripts call this after saving their results. ``key`` and ``text`` (the block the script used to splice in with
    :func:`insert_block`) are ignored: the README is generated as a whole by ``report.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pyro_dag_benchmarks_report",
                                                  os.path.join(os.path.dirname(README), "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.regenerate()
