"""``pyro-dag discover``: Bayesian structure learning from the command line (SVI-DAG, Zinage 2026,
arXiv:2608.04930; the exact posterior of the same model for small graphs, :mod:`pyro_dag.structure`).

* ``pyro-dag discover sachs`` -- the shipped Sachs data (7466 x 11, :func:`pyro_dag.datasets.sachs`) scored
  against the 17-edge acyclic consensus DAG;
* ``pyro-dag discover --csv FILE [--truth ADJ.csv]`` -- your own data (a header row of variable names, one column
  per variable); with ``--truth`` (a ``p x p`` 0/1 CSV, ``A[i, j] = 1`` meaning ``i -> j``, same column order)
  the metrics are printed too.
* ``--interventions FILE`` -- known perfect interventions: a CSV with a header of (some of) the variable names and
  one 0/1 row per data row (1: the experiment set that variable in that row); or ``--intervention-column NAME``, a
  column of ``--csv`` naming the intervened variables of each row (``;``-separated, empty: observational), which is
  then not a variable; ``sachs --interventions known`` uses the nine conditions and their published targets
  (:func:`pyro_dag.datasets.sachs_experiments`). The posterior is then the interventional one
  (Cooper & Yoo 1999; Eaton & Murphy 2007), computed exactly (``linear``/``bge``).

Writes to ``--out``: ``discover.json`` (settings, node names, edge probabilities, metrics, timing),
``edge_probs.png`` (heat map of ``P(i -> j)``) and ``posterior_graph.png`` (the posterior-mean graph: edges with
``P > 0.5``, width proportional to probability). With ``--given "A->B,!C->D"`` (edge evidence, ``!`` = absent)
it also prints the conditional edge table and MAP DAG (exact with ``--exact``, from the samples otherwise) and
writes ``edge_probs_given.png`` (the conditional heat map beside the unconditional one). The figures are drawn by
:mod:`pyro_dag.plot`.
"""
import os
import time

from ..outputs import OutputSet
from ..plot import save_conditional_heatmap, save_structure_figures

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register the ``discover`` sub-command on an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser(
        "discover",
        help="Bayesian DAG structure learning (SVI-DAG: flow guide + SVGD over orders)",
        description="Fit a posterior over DAGs with pyro_dag.structure.fit, print metrics when the true graph is "
        "known, and write edge probabilities (JSON), a heat map and the posterior-mean graph (PNG).",
    )
    p.add_argument("dataset", nargs="?", choices=["sachs"], help="built-in data set (or use --csv)")
    p.add_argument("--csv", help="CSV file: a header row of variable names, then one row per sample")
    p.add_argument("--truth", help="optional CSV of the true p x p adjacency (A[i, j] = 1: i -> j), no header")
    p.add_argument("--likelihood", choices=["linear", "bge", "linear-sites", "mlp", "gp"], default=None,
                   help="SEM likelihood (default: linear; gp: Gaussian-process mechanisms, scored exactly by the "
                        "GP network score, see pyro_dag.structure.fit)")
    p.add_argument("--weighting", choices=["uniform", "elbo", "order"], default=None,
                   help="posterior weights of the particles' orders (default: fit's: order with the exact order "
                        "score, used for linear/bge up to 14 variables)")
    p.add_argument("--exact", action="store_true",
                   help="compute the exact posterior of the same model instead of fitting it "
                        "(pyro_dag.structure.exact_posterior: likelihoods linear / bge, at most 20 variables, or gp, "
                        "at most 16)")
    p.add_argument("--steps", type=int, default=None,
                   help="SVGD optimisation steps of linear / bge / mlp (default: fit's default; not with gp or "
                        "--exact, which are scored exactly)")
    p.add_argument("--particles", type=int, default=None,
                   help="SVGD particles over orders (default: fit's, 40 for linear/bge, 20 for mlp)")
    p.add_argument("--samples", type=int, default=1000, help="posterior DAG samples for the metrics (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--expected-parents", type=float, default=1.5,
                   help="sparsity prior: expected number of parents per node (default 1.5)")
    p.add_argument("--interventions", default=None,
                   help="known perfect interventions: a CSV with a header of variable names and one 0/1 row per data "
                        "row (1: set by the experiment); with the sachs data set: 'known' (its nine conditions and "
                        "their published targets)")
    p.add_argument("--intervention-column", default=None,
                   help="a column of --csv naming each row's intervened variables (';'-separated, empty: "
                        "observational); it is not a variable")
    p.add_argument("--given", default=None,
                   help="edge evidence, e.g. 'A->B,!C->D' (! = absent): also print the conditional edge table and "
                        "MAP DAG and draw the conditional heat map (exact with --exact, else from the samples)")
    p.add_argument("--out", default="pyro_dag_discover", help="output directory (default ./pyro_dag_discover)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op CPU threads while fitting and sampling (default 1: fastest for these small tensors)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)
    return p


def _read_header(path):
    with open(path) as f:
        header = f.readline()
        has_rows = any(line.strip() for line in f)
    return header.strip(), has_rows


def _load(args):
    import numpy as np
    import torch

    if (args.dataset is None) == (args.csv is None):
        raise SystemExit("pyro-dag discover: give exactly one of a data set name (sachs) or --csv FILE")
    if args.dataset == "sachs":
        if args.truth:
            raise SystemExit("--truth is only for --csv; sachs is scored against its consensus DAG")
        from ..datasets import sachs

        if args.interventions not in (None, "known"):
            raise SystemExit(f"--interventions with sachs: 'known' (its conditions' published targets); got "
                             f"{args.interventions!r}")
        if args.intervention_column:
            raise SystemExit("--intervention-column is for --csv; use --interventions known with sachs")
        if args.interventions == "known":
            from ..datasets import sachs_experiments

            d = sachs_experiments(log=False)
            args.intervention_mask = d.mask
            return d.data, list(d.nodes), d.adjacency, "sachs (7466 x 11, 9 conditions, consensus DAG with 17 edges)"
        d = sachs()
        return d.data, list(d.nodes), d.adjacency, "sachs (7466 x 11, consensus DAG with 17 edges)"
    if os.path.isdir(args.csv):
        raise SystemExit(f"--csv {args.csv}: is a directory; give the CSV file inside it")
    if not os.path.exists(args.csv):
        raise SystemExit(f"--csv {args.csv}: no such file")
    header, has_rows = _read_header(args.csv)
    if not header:
        raise SystemExit(f"--csv {args.csv}: the file is empty; it needs a header row of variable names, then one "
                         "row of numbers per sample")
    if not has_rows:
        raise SystemExit(f"--csv {args.csv}: only a header row, no data; add one row of numbers per sample")
    names = [h.strip().strip('"') for h in header.split(",")]
    labels = None
    if args.intervention_column:
        if args.interventions:
            raise SystemExit("give one of --interventions FILE or --intervention-column NAME, not both")
        if args.intervention_column not in names:
            raise SystemExit(f"--intervention-column {args.intervention_column!r}: no such column in {args.csv} "
                             f"(columns: {names})")
        col = names.index(args.intervention_column)
        labels = _read_column(args.csv, col)
        names = names[:col] + names[col + 1:]
    dup = [h for i, h in enumerate(names) if h in names[:i]]
    if dup:
        raise SystemExit(f"--csv {args.csv}: column {dup[0]!r} appears {names.count(dup[0])} times in the header; "
                         "give each variable a unique name")
    if len(names) < 2:
        raise SystemExit(f"--csv {args.csv}: the header names {len(names)} variable; structure learning needs at least "
                         "2 comma-separated columns")
    try:
        keep = None if labels is None else [k for k in range(len(names) + 1) if k != col]
        data = np.loadtxt(args.csv, delimiter=",", skiprows=1, ndmin=2, usecols=keep)
    except ValueError as e:
        why = _bad_cell(args.csv, names) or f"could not read numbers after the header row ({e})"
        raise SystemExit(f"--csv {args.csv}: {why}") from e
    if data.shape[1] != len(names):
        raise SystemExit(f"--csv {args.csv}: {len(names)} names in the header but {data.shape[1]} columns of data")
    if data.shape[0] < 2:
        raise SystemExit(f"--csv {args.csv}: {data.shape[0]} row of data; structure learning needs at least 2")
    if not np.isfinite(data).all():
        bad = [names[j] for j in np.nonzero(~np.isfinite(data).all(0))[0]]
        raise SystemExit(f"--csv {args.csv}: NaN or inf in columns {bad}; impute or drop those rows first")
    big = np.abs(data).max(0) > np.finfo(np.float32).max      # the fit runs in float32: they would become inf
    if big.any():
        raise SystemExit(f"--csv {args.csv}: columns {[names[j] for j in np.nonzero(big)[0]]} hold values beyond "
                         f"float32's range ({np.finfo(np.float32).max:.3g}); rescale them (e.g. divide by a power of "
                         "ten)")
    const = [names[j] for j in np.nonzero(np.ptp(data, axis=0) == 0)[0]]
    if const:  # the fit would refuse it with a traceback; a constant variable has no dependence to learn
        raise SystemExit(f"--csv {args.csv}: column{'s' if len(const) > 1 else ''} {', '.join(map(repr, const))} "
                         f"{'are' if len(const) > 1 else 'is'} constant (every row the same value), so there is no "
                         "dependence to learn; drop it from the file")
    truth = None
    if args.truth:
        if os.path.isdir(args.truth) or not os.path.exists(args.truth):
            raise SystemExit(f"--truth {args.truth}: no such file; give a CSV of the true {len(names)} x {len(names)} "
                             "0/1 adjacency (A[i, j] = 1: i -> j), no header")
        try:
            truth = np.loadtxt(args.truth, delimiter=",", ndmin=2)
        except ValueError as e:
            raise SystemExit(f"--truth {args.truth}: could not read a 0/1 matrix ({e}); give {len(names)} rows of "
                             f"{len(names)} comma-separated 0/1 entries, no header") from e
        if truth.shape != (len(names), len(names)):
            raise SystemExit(f"--truth must be a {len(names)} x {len(names)} 0/1 matrix; got {truth.shape}")
        if not np.isin(truth, (0, 1)).all() or np.diagonal(truth).any():
            raise SystemExit(f"--truth {args.truth}: entries must be 0 or 1 with a zero diagonal (A[i, j] = 1: i -> j)")
        _check_truth_acyclic(args.truth, truth, names)
        truth = torch.as_tensor(truth, dtype=torch.float32)
    if labels is not None:
        args.intervention_mask = _mask_from_labels(args.intervention_column, labels, names)
    elif args.interventions:
        args.intervention_mask = _read_mask(args.interventions, names, data.shape[0])
    return torch.as_tensor(data, dtype=torch.float32), names, truth, f"{args.csv} ({data.shape[0]} x {data.shape[1]})"


def _read_column(path, col):
    """The cells of column ``col`` of a CSV (after its header), as stripped strings."""
    import csv

    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if any(c.strip() for c in r)][1:]
    return [r[col].strip().strip('"') if col < len(r) else "" for r in rows]


def _mask_from_labels(column, labels, names):
    """``[N, p]`` mask from a column naming each row's intervened variables (``;``-separated)."""
    import numpy as np

    mask = np.zeros((len(labels), len(names)), dtype=bool)
    for r, cell in enumerate(labels):
        for t in (s.strip() for s in cell.split(";")):
            if not t:
                continue
            if t not in names:
                raise SystemExit(f"--intervention-column {column!r}: line {r + 2} names {t!r}, which is not a "
                                 f"variable (variables: {names})")
            mask[r, names.index(t)] = True
    return mask


def _read_mask(path, names, num_rows):
    """``[N, p]`` mask from a CSV with a header of variable names and one 0/1 row per data row."""
    import numpy as np

    if os.path.isdir(path) or not os.path.exists(path):
        raise SystemExit(f"--interventions {path}: no such file; give a CSV with a header of variable names and one "
                         "0/1 row per data row")
    header, _ = _read_header(path)
    cols = [h.strip().strip('"') for h in header.split(",")]
    unknown = [c for c in cols if c not in names]
    if unknown:
        raise SystemExit(f"--interventions {path}: column {unknown[0]!r} is not a variable of the data "
                         f"(variables: {names})")
    try:
        m = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as e:
        raise SystemExit(f"--interventions {path}: could not read 0/1 entries after the header ({e})") from e
    if m.shape != (num_rows, len(cols)):
        raise SystemExit(f"--interventions {path}: {m.shape[0]} rows x {m.shape[1]} columns; it needs one row per "
                         f"data row ({num_rows}) and one column per name in its header ({len(cols)})")
    if not np.isin(m, (0, 1)).all():
        r, c = (int(v) for v in np.argwhere(~np.isin(m, (0, 1)))[0])
        raise SystemExit(f"--interventions {path}: column {cols[c]!r} line {r + 2} holds {m[r, c]:g}; entries are "
                         "0 or 1 (1: the experiment set that variable in that row)")
    mask = np.zeros((num_rows, len(names)), dtype=bool)
    for k, c in enumerate(cols):
        mask[:, names.index(c)] = m[:, k] > 0.5
    return mask


def _bad_cell(path, names):
    """The first cell of ``path`` (after its header) that is not a number, described by its column name and line;
    ``None`` where every cell parses (then numpy's own message is shown)."""
    import csv

    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader, None)
        for line, row in enumerate(reader, start=2):
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(names):
                return f"line {line} has {len(row)} fields but the header names {len(names)} columns"
            for name, cell in zip(names, row):
                try:
                    float(cell)
                except ValueError:
                    if not cell.strip():
                        return (f"column {name!r} has an empty cell (a missing value) on line {line}; structure "
                                "learning needs complete rows: impute or drop that row")
                    return (f"column {name!r} holds {cell.strip()!r} on line {line}, which is not a number; encode "
                            "that column as numbers or drop it")
    return None


def _check_truth_acyclic(path, truth, names):
    """Refuse a ``--truth`` adjacency with a cycle, naming it: the metrics compare DAGs with a DAG."""
    import networkx as nx
    import numpy as np

    g = nx.DiGraph([(names[i], names[j]) for i, j in zip(*np.nonzero(truth))])
    if not nx.is_directed_acyclic_graph(g):
        cycle = [u for u, _ in nx.find_cycle(g)]
        raise SystemExit(f"--truth {path}: the true graph has a cycle ({' -> '.join(cycle + cycle[:1])}), so it is "
                         "not a DAG; check the matrix (A[i, j] = 1: i -> j, rows and columns in the CSV's column "
                         "order) and remove an edge of the cycle")


def _check_options(args):
    """Check the numeric options and the output directory before anything runs (a bad --out must not lose a run)."""
    import math

    import torch

    for name in ("steps", "particles", "samples", "threads"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise SystemExit(f"--{name} must be >= 1; got {v}")
    if args.seed < 0:
        raise SystemExit(f"--seed must be >= 0; got {args.seed}")
    if not (math.isfinite(args.expected_parents) and args.expected_parents > 0):
        raise SystemExit(f"--expected-parents must be a positive number; got {args.expected_parents}")
    try:
        device = torch.device(args.device)
    except (RuntimeError, ValueError):
        raise SystemExit(f"--device {args.device}: not a torch device; use cpu or cuda (cuda:0, ...)") from None
    if device.type not in ("cpu", "cuda"):
        raise SystemExit(f"--device {args.device}: pyro-dag discover runs on cpu or cuda; got {device.type}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available on this machine; use --device cpu")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise SystemExit(f"--out {args.out}: exists and is not a directory; choose a directory for the results")
    try:
        os.makedirs(args.out, exist_ok=True)
        probe = os.path.join(args.out, ".pyro_dag_write_test")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise SystemExit(f"--out {args.out}: cannot write there ({e.strerror or e}); choose a writable directory") from None


def _metrics(P, S, truth, mask=None):
    from ..metrics.structure import auprc, auroc, brier, expected_f1, expected_shd, is_dag

    out = {}
    out["dag"] = {
        "brier": brier(P, truth),
        "expected_shd": expected_shd(S, truth),
        "expected_shd_reversal2": expected_shd(S, truth, reversal_cost=2),
        "expected_f1": expected_f1(S, truth),
        "auroc": auroc(P, truth),
        "auprc": auprc(P, truth),
    }
    if is_dag(truth):
        out["cpdag"] = {
            "expected_shd": expected_shd(S, truth, level="cpdag"),
            "expected_f1": expected_f1(S, truth, level="cpdag"),
            "auroc": auroc(S, truth, level="cpdag"),
        }
    if mask is not None and is_dag(truth):
        out["icpdag"] = {
            "expected_shd": expected_shd(S, truth, level="cpdag", targets=mask),
            "auroc": auroc(S, truth, level="cpdag", targets=mask),
        }
    out["skeleton"] = {
        "brier": brier(P, truth, level="skeleton"),
        "auroc": auroc(P, truth, level="skeleton"),
        "expected_f1": expected_f1(S, truth, level="skeleton"),
    }
    return out


def _parse_given(args, names):
    """``--given`` checked against the data's variables before the fit: an :class:`Evidence`, or ``None``.

    :raises SystemExit: naming the bad edge (syntax, unknown variable, self-loop, contradiction, required edges
        that form a cycle)."""
    import networkx as nx

    from ..structure.evidence import parse_evidence, parse_evidence_string

    if not args.given:
        return None
    try:
        evidence = parse_evidence(parse_evidence_string(args.given), len(names), names)
    except ValueError as e:
        raise SystemExit(str(e) if str(e).startswith("--given") else f"--given: {e}") from None
    required = nx.DiGraph([(names[i], names[j]) for (i, j), present in evidence.edges.items() if present])
    if not nx.is_directed_acyclic_graph(required):
        cycle = " -> ".join(u for u, _ in nx.find_cycle(required))
        raise SystemExit(f"--given: the required edges form a cycle ({cycle} -> {nx.find_cycle(required)[0][0]}), "
                         "which no DAG contains; drop one of them")
    return evidence


def _given(args, evidence, post, P, names, result, out):
    """``--given``: conditional edge probabilities and MAP DAG, printed, stored and drawn next to the
    unconditional heat map (``edge_probs_given.png``)."""
    try:
        evidence = post.parse_evidence(evidence)
        n = max(args.samples, 1000)
        Pg = post.edge_probs(n, seed=args.seed, given=evidence).cpu().double()
        A = post.map_dag(given=evidence, num_samples=n, seed=args.seed).cpu()
        prob = post.prob(evidence, n, seed=args.seed)
    except ValueError as e:
        raise SystemExit(f"--given: {e}") from None
    label = ", ".join(f"{'' if v else 'not '}{names[i]}->{names[j]}" for (i, j), v in evidence.edges.items())
    print(f"  given {label}: P(evidence) = {prob:.4g}" + ("" if args.exact else f" (from {n} samples)"))
    free = evidence.unspecified()
    rows = sorted(((float(Pg[i, j]), float(P[i, j]), names[i], names[j]) for i in range(len(names))
                   for j in range(len(names)) if free[i, j]), reverse=True)
    print("  conditional edge probabilities (given | unconditional):")
    for q, q0, a, b in rows[:10]:
        print(f"    {a}->{b}  {q:.3f} | {q0:.3f}")
    edges = [f"{names[i]}->{names[j]}" for i in range(len(names)) for j in range(len(names)) if A[i, j] > 0.5]
    print("  MAP DAG given the evidence: " + (", ".join(edges) if edges else "(no edges)"))
    out.call(["edge_probs_given.png"],
             lambda: save_conditional_heatmap(P.numpy(), Pg.numpy(), names, args.out, label))
    return {"evidence": args.given, "prob": prob, "edge_probs": Pg.tolist(), "map_dag": A.tolist()}


def run(args):
    """Execute ``pyro-dag discover`` (see the module docstring); returns 0."""
    from ..threads import limit_threads

    _check_options(args)
    with limit_threads(args.threads):
        return _run(args)


def _run(args):
    # from its module, not the package, so that a test's patched fit is the one called
    from ..structure.fitting import fit

    if args.exact or args.likelihood == "gp":
        # scored exactly: no SVGD steps or particles, which would be ignored without a word
        what = "--exact computes the posterior exactly" if args.exact else \
            "--likelihood gp is scored exactly (the exact or hybrid posterior)"
        for name in ("steps", "particles"):
            if getattr(args, name) is not None:
                raise SystemExit(f"pyro-dag discover: --{name} sets the SVGD fit of linear / bge / mlp, but {what}: "
                                 f"drop --{name}")
    args.intervention_mask = None
    X, names, truth, desc = _load(args)
    mask = args.intervention_mask
    evidence = _parse_given(args, names)         # before the fit: a typo must not cost a run
    likelihood = args.likelihood or "linear"
    weighting = args.weighting  # None: fit's default
    t0 = time.perf_counter()
    if mask is not None and likelihood not in ("linear", "bge"):
        raise SystemExit(f"--interventions: the interventional posterior is computed for --likelihood linear or bge; "
                         f"not {likelihood}")
    if mask is not None and not args.exact:
        from ..structure import exact_posterior, hybrid_posterior

        try:
            if X.shape[1] <= 14:
                post = exact_posterior(X.double(), likelihood=likelihood, expected_parents=args.expected_parents,
                                       node_names=names, num_threads=None, interventions=mask)
                method = "exact"
            else:
                post = hybrid_posterior(X.double(), likelihood=likelihood, expected_parents=args.expected_parents,
                                        node_names=names, num_threads=None, interventions=mask, seed=args.seed)
                method = "hybrid"
        except ValueError as e:
            raise SystemExit(f"--interventions: {e}") from None
        settings = {"method": method, "num_particles": method, "num_steps": 0, "interventions": int(mask.sum()),
                    "expected_parents": args.expected_parents}
        P = post.edge_probs().float()
    elif args.exact:
        from ..structure import exact_posterior
        from ..structure.exact import GP_MAX_NODES, MAX_NODES

        if likelihood not in ("linear", "bge", "gp"):
            raise SystemExit(f"--exact needs a likelihood it can score exactly (--likelihood linear, bge or gp), "
                             f"not {likelihood}")
        limit = GP_MAX_NODES if likelihood == "gp" else MAX_NODES
        if X.shape[1] > limit:
            raise SystemExit(f"pyro-dag discover: --exact with --likelihood {likelihood} handles at most {limit} "
                             f"variables; the data have {X.shape[1]}: drop --exact (fit scales further)")
        try:
            post = exact_posterior(X.double(), likelihood=likelihood, expected_parents=args.expected_parents,
                                   node_names=names, num_threads=None, interventions=mask)
        except ValueError as e:
            if mask is None:
                raise
            raise SystemExit(f"--interventions: {e}") from None
        settings = {"method": "exact", "num_particles": "exact", "num_steps": 0,
                    "interventions": 0 if mask is None else int(mask.sum()),
                    "expected_parents": args.expected_parents, "log_evidence": post.log_evidence}
        P = post.edge_probs().float()
    elif likelihood == "gp":  # scored exactly (fit hands it to the exact or hybrid posterior): no SVI settings
        post = fit(X.double(), likelihood="gp", expected_parents=args.expected_parents, node_names=names,
                   num_threads=None)
        settings = dict(post.settings, num_particles="exact", num_steps=0, expected_parents=args.expected_parents)
        P = post.edge_probs().float()
    else:
        post = fit(X.to(args.device), likelihood=likelihood, num_particles=args.particles, num_steps=args.steps,
                   seed=args.seed, progress=not args.no_progress, expected_parents=args.expected_parents,
                   node_names=names, weighting=weighting, num_threads=None)
        P = post.edge_probs(max(args.samples, 1000), seed=args.seed).cpu()
        settings = post.settings
    S = post.sample(args.samples, seed=args.seed).cpu()
    wall = time.perf_counter() - t0
    result = {
        "data": desc,
        "nodes": names,
        "likelihood": likelihood,
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()},
        "wall_seconds": wall,
        "edge_probs": P.tolist(),
        "mean_num_edges": float(S.sum((-1, -2)).float().mean()),
    }
    print(f"pyro-dag discover | {desc} | likelihood={likelihood} particles={settings['num_particles']} "
          f"steps={settings['num_steps']} | {wall:.1f}s")
    order = sorted(((float(P[i, j]), names[i], names[j]) for i in range(len(names)) for j in range(len(names))
                    if i != j), reverse=True)
    print("  most probable edges: " + ", ".join(f"{a}->{b} {q:.2f}" for q, a, b in order[:8]))
    if truth is not None:
        m = _metrics(P, S, truth.cpu(), mask)
        result["metrics"] = m
        d = m["dag"]
        print(f"  DAG level:  AUROC {100 * d['auroc']:.1f}  AUPRC {100 * d['auprc']:.1f}  E-F1 {100 * d['expected_f1']:.1f}"
              f"  E-SHD {d['expected_shd']:.2f} (reversal=2: {d['expected_shd_reversal2']:.2f})  Brier {d['brier']:.4f}")
        if "cpdag" in m:
            c = m["cpdag"]
            print(f"  CPDAG level: AUROC {100 * c['auroc']:.1f}  E-F1 {100 * c['expected_f1']:.1f}  "
                  f"E-SHD {c['expected_shd']:.2f}")
        if "icpdag" in m:
            c = m["icpdag"]
            print(f"  interventional CPDAG level (the experiments' targets): AUROC {100 * c['auroc']:.1f}  "
                  f"E-SHD {c['expected_shd']:.2f}")
    given = ["edge_probs_given.png"] if args.given else []
    out = OutputSet(args.out, ["edge_probs.png", "posterior_graph.png"] + given + ["discover.json"])  # atomically
    heat, graph = out.call(["edge_probs.png", "posterior_graph.png"],
                           lambda: save_structure_figures(P.numpy(), names, args.out))
    if args.given:
        result["given"] = _given(args, evidence, post, P, names, result, out)
    path = out.json("discover.json", result, indent=1)
    print(f"  wrote {path}, {heat}, {graph}")
    return 0
