"""Conditional edge queries and the paper's metrics on the setting of Wang, Wicker & Kwiatkowska 2022 (*Tractable
Uncertainty for Structure Learning*, ICML, §6, Table 2 and Fig. 2).

Data (the paper's §6): Erdős–Rényi DAGs on d nodes with 2d expected edges (edge probability min(4/(d-1), 0.5) on
the strict lower triangle of a random order), linear-Gaussian weights W ~ N(0, 1), noise variance 0.1, N = 100
training and 1000 test points, BGe score (α_μ = 1, α_w = d + 2, T = ½ I, as the paper). Graph prior: the library's
edge prior, or the paper's "fair" prior (rows marked "fair").

Query (Table 2): condition on n ∈ {4, 8, 16} randomly chosen true edges (all present), score every unspecified
off-diagonal pair by its conditional probability, AUROC against the true graph; evidence that a method gives
probability 0 (no sample satisfies it, or outside a circuit's support) falls back to the unconditional edge
probabilities, as in the paper, and is counted in "coverage". Fig. 2: E-SHD between CPDAGs, edge AUROC, held-out
BGe MLL of the test points, MSE of the causal effects against (I - W)^-1 over i ≠ j.

Methods, d = 16 (every node a candidate parent: the exact model):
* ``exact`` / ``exact_fair``: the exact order DP given the evidence (ceiling), edge / fair prior;
* ``spn_greedy`` (/ ``_fair``): ``order_spn(tables, "greedy")``, the K heaviest balanced splits of every sub-problem;
* ``spn_exact`` (/ ``_fair``): ``order_spn(tables, "exact", num_orders=1000)``, splits from exact order samples
  (K = 64, 16, 6, 2, the paper's d = 16 setting), closed-form weights, exact circuit queries;
* ``spn_fit``: the circuit built on the orders ``fit`` visited; ``spn_random``: random splits (the paper's ablation);
* ``fit_samples``: sample-based conditionals from 1000 ``fit`` DAG samples (the role of Gadget/DiBS samples).
d = 32 (``--d 32 --expansion 32 8 2 6 2``): candidate tables (``--candidates`` per node), ``spn_greedy`` (order-MCMC
splits at the root, exact greedy splits below), ``spn_mcmc`` (splits from order-MCMC orders), ``spn_greedy_fair``,
and ``mcmc_samples`` (one exact DAG per order-MCMC order; sample-based).

    python benchmarks/structure_trust.py --graphs 10 --repeats 10 --resume     # d = 16
    python benchmarks/structure_trust.py --d 32 --expansion 32 8 2 6 2 --candidates 15 --graphs 3
    python benchmarks/structure_trust.py --quick                               # smoke run (d = 8, 1 graph)

Per graph the JSON is written (``--resume`` skips finished graphs; a graph of the first protocol, without the
fair-prior rows and the Fig. 2 metrics, is extended without re-running ``fit``). Results:
benchmarks/results/structure_trust.json (d = 16), structure_trust_d32.json and the README section
``structure_trust``.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

PAPER = {"TRUST-G": {4: 0.903, 8: 0.933, 16: 0.957}, "Gadget": {4: 0.905, 8: 0.888, 16: 0.876}}
METHODS = ["exact", "spn_greedy", "spn_exact", "spn_fit", "spn_random", "fit_samples"]  # the first protocol


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--graphs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10, help="random evidence sets per size and graph")
    ap.add_argument("--evidence", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--fit-steps", type=int, default=1000)
    ap.add_argument("--k", type=int, default=1000, help="fit DAG samples for the sample-based conditionals")
    ap.add_argument("--num-orders", type=int, default=1000, help="exact order samples for spn_exact")
    ap.add_argument("--expansion", type=int, nargs="+", default=[64, 16, 6, 2])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--resume", action="store_true", help="keep the graphs already in the JSON (same settings)")
    ap.add_argument("--only", type=int, nargs="+", help="run just these graph indices")
    ap.add_argument("--no-fit", action="store_true", help="d = 16: skip fit (and its rows) for graphs run now")
    ap.add_argument("--deadline", default=None, help="HH:MM (UTC): start no graph after this time")
    ap.add_argument("--readme-only", action="store_true", help="rewrite the README section from the JSON files")
    ap.add_argument("--note", default=None, help="text put under the tables (what ran)")
    ap.add_argument("--candidates", type=int, default=16, help="candidate parents per node (d > 20)")
    ap.add_argument("--selection", default="greedy", choices=["greedy", "pairwise"],
                    help="candidate selection (d > 20; candidate_tables(selection=...))")
    ap.add_argument("--candidate-recall", action="store_true",
                    help="d > 20: only measure the true-parent recall and cost of the candidate selections vs K")
    ap.add_argument("--dibs", action="store_true",
                    help="d = 16: add the DiBS row (MarginalDiBS + BGe, dibs-lib) to the graphs already in the JSON")
    ap.add_argument("--dibs-steps", type=int, default=1000)
    ap.add_argument("--dibs-particles", type=int, default=20)
    return ap.parse_args()


def er_data(d, seed, n_train=100, n_test=1000):
    import numpy as np

    rng = np.random.default_rng(seed)
    p_edge = min(4.0 / (d - 1), 0.5)
    lower = np.tril(rng.random((d, d)) < p_edge, -1)
    perm = rng.permutation(d)
    A = np.zeros((d, d), dtype=int)
    A[np.ix_(perm, perm)] = lower.T        # A[i, j]: i -> j, acyclic along perm
    W = A * rng.normal(size=(d, d))
    eps = rng.normal(scale=0.1 ** 0.5, size=(n_train + n_test, d))
    X = eps @ np.linalg.inv(np.eye(d) - W)
    return X[:n_train], X[n_train:], A, W


def cond_auroc(P, A, ev):
    import numpy as np

    from pyro_dag.metrics.structure import _auroc

    free = ev.unspecified()
    return _auroc(np.asarray(P)[free], A[free])


def cond_auroc_all(obj_for, methods, A, d, args, g, uncond, samples):
    """Conditional AUROC and coverage of every method over the evidence sets of graph ``g`` (the same sets for
    every method: ``default_rng(g)``, true edges only)."""
    import numpy as np

    from pyro_dag.structure import parse_evidence

    rng = np.random.default_rng(g)
    true_edges = np.argwhere(A > 0)
    cond, cov, qt = {m: {} for m in methods}, {m: {} for m in methods}, {m: 0.0 for m in methods}
    for n in args.evidence:
        for m in methods:
            cond[m][n], cov[m][n] = [], []
        for r in range(args.repeats):
            pick = true_edges[rng.choice(len(true_edges), size=min(n, len(true_edges)), replace=False)]
            ev = parse_evidence({(int(i), int(j)): True for i, j in pick}, d)
            for m in methods:
                t = time.perf_counter()
                if m in samples:
                    S = samples[m]
                    keep = ev.holds(S)
                    ok = bool(keep.any())
                    P = S[keep].double().mean(0).numpy() if ok else uncond[m]
                else:
                    obj = obj_for[m]
                    ok = obj.prob(ev) > 0
                    P = obj.edge_probs(given=ev).numpy() if ok else uncond[m]
                qt[m] += time.perf_counter() - t
                cond[m][n].append(cond_auroc(P, A, ev))
                cov[m][n].append(bool(ok))
    return cond, cov, qt


def paper_metrics(objs, samples, A, W, X, Xt, d, seed, effects_exact, eshd_samples=1000):
    """E-SHD (CPDAG), AUROC, held-out MLL and MSE of causal effects (Wang, Wicker & Kwiatkowska 2022, §6) of every
    method: E-SHD and MLL from 1000 / 200 DAG samples, AUROC from the edge marginals, MSE-CE
    ``1/(d(d-1)) Σ_{i≠j} (BCE(i, j) - [(I - W)^{-1}]_ij)²`` with the posteriors' effects (fitted on standardised
    data) rescaled to the raw data's units (``BCE_raw(i, j) = BCE(i, j) sd_j / sd_i``)."""
    import numpy as np
    import torch

    from pyro_dag.metrics import auroc, expected_shd
    from pyro_dag.structure.causal import bge_mean_weights, total_effects

    sd = X.std(0, ddof=1)
    E_true = np.linalg.inv(np.eye(d) - W)
    off = ~np.eye(d, dtype=bool)
    Xt_t = torch.as_tensor(Xt)
    out = {"eshd": {}, "auroc": {}, "mll": {}, "mse_ce": {}, "time_s": {}}
    for m in list(objs) + [k for k in samples if ":" not in k]:
        t = time.perf_counter()
        if m in samples:
            S = samples[m].double()
            Xs = samples[m + ":data"]
            P = S.mean(0).numpy()
            E = total_effects(bge_mean_weights(Xs, S)).mean(0).numpy()
            from pyro_dag.structure import BGeSEM

            ll = torch.cat([BGeSEM(d).node_scores(Xt_t, c).sum(-1) for c in S[:200].split(100)])
            out["mll"][m] = float(ll.mean())
        else:
            obj = objs[m]
            S = obj.sample(1000, seed=seed)
            P = obj.edge_probs().numpy()
            if effects_exact:
                E = obj.causal_effects(1000, seed=seed).numpy()
            else:                                          # circuit effect tables too large: 1000 circuit samples
                E = total_effects(bge_mean_weights(obj.data, S)).mean(0).numpy()
            out["mll"][m] = obj.held_out_log_likelihood(Xt_t, 200, seed=0)
        out["eshd"][m] = float(expected_shd(S[:eshd_samples].numpy(), A, level="cpdag"))
        out["auroc"][m] = float(auroc(P, A))
        E_raw = E * sd[None, :] / sd[:, None]
        out["mse_ce"][m] = float(((E_raw - E_true)[off] ** 2).mean())
        out["time_s"][m] = time.perf_counter() - t
    return out


def mcmc_dag_samples(ct, orders, seed):
    """One exact DAG per order (each node's parent set drawn given its predecessors): the sample-based peer."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    p = ct.num_nodes
    out = np.zeros((len(orders), p, p))
    for s, order in enumerate(orders):
        pred = 0
        for j in order:
            subs = ct._parent_sets(int(j), pred)
            lw = ct._g[np.full(len(subs), int(j)), subs]
            w = np.exp(lw - lw.max())
            G = int(subs[rng.choice(len(subs), p=w / w.sum())])
            out[s, :, j] = (G >> np.arange(p)) & 1
            pred |= 1 << int(j)
    return torch.as_tensor(out)


def run_d16(g, args, old=None):
    """One d = 16 graph. ``old``: a record of the earlier protocol (edge-prior methods' conditional AUROC already
    there): extended with the fair-prior methods and the paper's metrics, without re-running ``fit``."""
    import torch

    from pyro_dag.metrics import auroc
    from pyro_dag.structure import fit, order_spn
    from pyro_dag.structure.parent_set_tables import candidate_tables

    d = args.d
    X, Xt, A, W = er_data(d, seed=1000 + g)
    rec = old if old is not None else {"graph": g, "num_edges": int(A.sum()), "time_s": {}, "auroc": {},
                                       "cond": {}, "coverage": {}}
    rec.setdefault("time_s", {})
    t = time.perf_counter()
    ct = candidate_tables(X, likelihood="bge", num_candidates=d - 1)       # every node a candidate: exact model
    ex = ct.to_exact()
    ct_fair = ct.with_prior("fair")
    ex_fair = ct_fair.to_exact()
    rec["time_s"]["exact_posterior_v2"] = time.perf_counter() - t
    objs = {"exact": ex, "exact_fair": ex_fair}
    samples = {}
    post = None
    if old is None and not args.no_fit:
        t = time.perf_counter()
        post = fit(torch.as_tensor(X, dtype=torch.float32), likelihood="bge", order_score="exact",
                   num_steps=args.fit_steps, seed=g, progress=False)
        rec["time_s"]["fit"] = time.perf_counter() - t
        S = post.sample(args.k, seed=g)
        samples["fit_samples"] = S
        samples["fit_samples:data"] = post.data if getattr(post, "data", None) is not None else ex.data
    builds = [("spn_greedy", ex, "greedy"), ("spn_exact", ex, "exact"), ("spn_random", ex, "random"),
              ("spn_greedy_fair", ex_fair, "greedy"), ("spn_exact_fair", ex_fair, "exact")]
    if post is not None:
        builds.insert(2, ("spn_fit", ex, post))
    for name, tab, oracle in builds:
        t = time.perf_counter()
        objs[name] = order_spn(tab, oracle, num_orders=args.num_orders, expansion=tuple(args.expansion), seed=g)
        rec["time_s"][f"{name}_build"] = time.perf_counter() - t
        rec.setdefault("spn_coverage", {})[name] = objs[name].coverage
    uncond = {k: o.edge_probs().numpy() for k, o in objs.items()}
    if "fit_samples" in samples:
        uncond["fit_samples"] = samples["fit_samples"].double().mean(0).numpy()
    new = [m for m in list(objs) + [m for m in samples if ":" not in m]
           if old is None or m not in old["cond"]]
    for m in new:
        rec["auroc"][m] = float(auroc(uncond[m], A))
    cond, cov, qt = cond_auroc_all(objs, new, A, d, args, g, uncond, samples)
    for m in new:
        rec["cond"][m], rec["coverage"][m] = cond[m], cov[m]
    rec["time_s"].setdefault("queries", {}).update(qt)
    rec["paper_metrics"] = paper_metrics({k: v for k, v in objs.items() if k != "spn_random"},
                                         {k: v for k, v in samples.items()}, A, W, X, Xt, d, g, True)
    rec["v2"] = True
    return rec


def run_d32(g, args):
    """One d = 32 graph: candidate tables (``--candidates`` per node), circuits on the greedy oracle (order-MCMC
    splits at the root, exact greedy splits below 21 variables) with both priors and on order-MCMC orders, and the
    sample-based peer (one exact DAG per order-MCMC order)."""
    from pyro_dag.metrics import auroc
    from pyro_dag.structure import order_spn
    from pyro_dag.structure.order_sampler import order_mcmc
    from pyro_dag.structure.parent_set_tables import candidate_tables

    d = args.d
    X, Xt, A, W = er_data(d, seed=1000 + g)
    rec = {"graph": g, "num_edges": int(A.sum()), "time_s": {}, "auroc": {}, "cond": {}, "coverage": {}}
    t = time.perf_counter()
    c = time.process_time()
    ct = candidate_tables(X, likelihood="bge", num_candidates=args.candidates, selection=args.selection)
    ct_fair = ct.with_prior("fair")
    rec["time_s"]["tables"] = time.perf_counter() - t
    rec["cpu_s"] = {"tables": time.process_time() - c}
    rec["selection"] = args.selection
    rec["candidate_recall"] = float(sum(A[k, i] for i in range(d) for k in ct.candidates[i]) / A.sum())
    t = time.perf_counter()
    orders = order_mcmc(ct, args.num_orders, seed=g)
    rec["time_s"]["order_mcmc"] = time.perf_counter() - t
    samples = {"mcmc_samples": mcmc_dag_samples(ct, orders, g), "mcmc_samples:data": ct.data}
    objs = {}
    for name, tab, oracle in (("spn_greedy", ct, "greedy"), ("spn_mcmc", ct, orders),
                              ("spn_greedy_fair", ct_fair, "greedy")):
        t = time.perf_counter()
        objs[name] = order_spn(tab, oracle, num_orders=args.num_orders, expansion=tuple(args.expansion), seed=g)
        rec["time_s"][f"{name}_build"] = time.perf_counter() - t
        rec.setdefault("log_Z_support", {})[name] = objs[name].log_Z_support
    uncond = {k: o.edge_probs().numpy() for k, o in objs.items()}
    uncond["mcmc_samples"] = samples["mcmc_samples"].double().mean(0).numpy()
    methods = list(objs) + ["mcmc_samples"]
    rec["auroc"] = {m: float(auroc(uncond[m], A)) for m in methods}
    cond, cov, qt = cond_auroc_all(objs, methods, A, d, args, g, uncond, samples)
    rec["cond"], rec["coverage"], rec["time_s"]["queries"] = cond, cov, qt
    # E-SHD from 200 samples here: the CPDAG of every 32-node sample costs ~10 ms
    rec["paper_metrics"] = paper_metrics(objs, {k: v for k, v in samples.items()}, A, W, X, Xt, d, g, False,
                                         eshd_samples=200)
    rec["v2"] = True
    return rec


def add_dibs(rec, g, args):
    """Add DiBS (Lorch et al. 2021; MarginalDiBS + BGe, ``dibs-lib``, the settings of the ER benchmark) to a finished
    d = 16 graph: its particles with their mixture weights, resampled to ``--k`` DAGs (so that every sample-based
    metric is the Monte Carlo version of the weighted one), as a sample-based row on the same evidence sets."""
    import numpy as np
    import torch

    from pyro_dag.metrics import auroc
    from pyro_dag.structure.data import standardize_columns

    d = args.d
    X, Xt, A, W = er_data(d, seed=1000 + g)
    Xs = standardize_columns(torch.as_tensor(X))                 # the data the library's posteriors score
    t, c = time.perf_counter(), time.process_time()
    out = sc.run_dibs(Xs.numpy(), "linear", g, n_particles=args.dibs_particles, steps=args.dibs_steps)
    rec["time_s"]["dibs"] = time.perf_counter() - t
    rec.setdefault("cpu_s", {})["dibs"] = time.process_time() - c
    from pyro_dag.metrics import is_dag

    G = np.asarray(out["samples"])
    w = out["weights"] if out["weights"] is not None else np.full(len(G), 1.0 / len(G))
    acyc = np.asarray(is_dag(G))
    if not acyc.any():
        raise RuntimeError(f"graph {g}: every DiBS particle is cyclic ({out['info']}); run more --dibs-steps")
    G, w = G[acyc], w[acyc] / w[acyc].sum()
    pick = np.random.default_rng(g).choice(len(G), size=args.k, p=w)
    S = torch.as_tensor(G[pick], dtype=torch.float64)
    rec["dibs_info"] = dict(out["info"], distinct_graphs=int(len({a.tobytes() for a in G})),
                            max_weight=float(np.max(w)))
    samples = {"dibs_samples": S, "dibs_samples:data": Xs}
    uncond = {"dibs_samples": S.mean(0).numpy()}
    rec["auroc"]["dibs_samples"] = float(auroc(uncond["dibs_samples"], A))
    cond, cov, qt = cond_auroc_all({}, ["dibs_samples"], A, d, args, g, uncond, samples)
    rec["cond"]["dibs_samples"], rec["coverage"]["dibs_samples"] = cond["dibs_samples"], cov["dibs_samples"]
    rec["time_s"].setdefault("queries", {}).update(qt)
    pm = paper_metrics({}, samples, A, W, X, Xt, d, g, True)
    for k, v in pm.items():
        rec["paper_metrics"].setdefault(k, {}).update(v)
    return rec


SELECTIONS = (("pairwise", {"selection": "pairwise"}),
              ("greedy, plain", {"selection": "greedy", "reverse_top": None}),
              ("greedy + reverse tier", {"selection": "greedy"}))


def candidate_recall(args, Ks=(8, 12, 16, 20)):
    """Recall of the true parents (fraction of true edges ``k -> i`` with ``k ∈ C_i``) and CPU seconds of each
    candidate selection against ``K`` on the d = 32 graphs, and the probability that a random evidence set of
    ``n`` true edges lies inside the candidate sets (the ceiling of any candidate-restricted method's coverage)."""
    import numpy as np

    from pyro_dag.structure.candidate_selection import select_candidates

    rows = []
    for g in range(args.graphs):
        X, _, A, _ = er_data(args.d, seed=1000 + g)
        true = np.argwhere(A > 0)
        for K in Ks:
            for name, kw in SELECTIONS:
                c = time.process_time()
                C = select_candidates(X, K, **kw)
                cpu = time.process_time() - c
                inside = np.array([k in C[i] for k, i in true])
                rng = np.random.default_rng(g)
                ceil = {n: float(np.mean([inside[rng.choice(len(true), size=n, replace=False)].all()
                                          for _ in range(2000)])) for n in args.evidence}
                rows.append({"graph": g, "K": K, "selection": name, "recall": float(inside.mean()),
                             "cpu_s": cpu, "evidence_inside": ceil})
                print(json.dumps(rows[-1]), flush=True)
    path = os.path.join(sc.RESULTS, f"structure_trust_d{args.d}_candidates.json")
    with open(path, "w") as f:
        json.dump({"settings": {"d": args.d, "graphs": args.graphs, "Ks": list(Ks)}, "rows": rows,
                   "environment": sc.environment(), "load_average": os.getloadavg()}, f, indent=1)
    print("wrote", path, flush=True)


CORE = ("d", "repeats", "evidence", "fit_steps", "k", "num_orders", "expansion")


def main():
    args = parse()
    sc.single_thread()
    if args.quick:
        args.d, args.graphs, args.repeats, args.fit_steps, args.evidence = 8, 1, 3, 200, [2, 4]
        args.expansion = [8, 4, 2]
    if args.candidate_recall:
        return candidate_recall(args)
    name = result_name(args)
    path = os.path.join(sc.RESULTS, f"{name}.json")
    if args.readme_only:
        with open(path) as f:
            payload = json.load(f)
        if args.note is not None:
            payload["note"] = args.note
        write_readme(payload)
        return
    runs = []
    if args.resume and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        core = CORE + (("candidates", "selection") if args.d > 20 else ())
        if any(old["settings"].get(k) != getattr(args, k) for k in core):
            raise SystemExit(f"--resume: {path} was written with other settings: {old['settings']}")
        runs = old["runs"]
        for r in runs:                            # JSON keys are strings
            for field in ("cond", "coverage"):
                r[field] = {m: {int(k): v for k, v in dd.items()} for m, dd in r[field].items()}
    by_graph = {r["graph"]: r for r in runs}
    payload = None
    for g in (args.only if args.only else range(args.graphs)):
        r = by_graph.get(g)
        if args.dibs:
            if r is None or not r.get("v2") or "dibs_samples" in r["cond"]:
                continue
        elif r is not None and r.get("v2"):
            continue
        if args.deadline is not None and time.strftime("%H:%M", time.gmtime()) >= args.deadline:
            print(f"deadline {args.deadline} UTC reached: graph {g} and later not started", flush=True)
            break
        t0, c0 = time.perf_counter(), time.process_time()
        if args.dibs:
            rec = add_dibs(r, g, args)
            rec["load_average_dibs"] = os.getloadavg()
            by_graph[g] = rec
            runs = [by_graph[k] for k in sorted(by_graph)]
            print(json.dumps({"graph": g, "dibs_cpu_s": rec["cpu_s"]["dibs"], "auroc": rec["auroc"]["dibs_samples"],
                              "info": rec["dibs_info"]}), flush=True)
            payload = save(args, runs)
            continue
        if args.d > 20:
            rec = run_d32(g, args)
        else:
            rec = run_d16(g, args, old=r)
        rec["time_s"]["total_v2"] = time.perf_counter() - t0
        rec.setdefault("cpu_s", {})["total"] = time.process_time() - c0
        rec["load_average"] = os.getloadavg()
        by_graph[g] = rec
        runs = [by_graph[k] for k in sorted(by_graph)]
        print(json.dumps({"graph": g, "total_s": rec["time_s"]["total_v2"], "auroc": rec["auroc"],
                          "cond16": {m: sum(v[max(v)]) / len(v[max(v)]) for m, v in rec["cond"].items()}}),
              flush=True)
        payload = save(args, runs)            # after every graph: an interrupted run keeps what it finished
    if payload is None:
        payload = save(args, runs)
    if not args.quick and not args.no_readme and args.d <= 20:
        write_readme(payload)


def result_name(args):
    if args.quick:
        return "structure_trust_quick"
    return "structure_trust" if args.d <= 20 else f"structure_trust_d{args.d}"


def save(args, runs):
    import numpy as np

    methods = []
    for rec in runs:
        methods += [m for m in rec["cond"] if m not in methods]
    summary = {}
    for m in methods:
        have = [rec for rec in runs if m in rec["cond"]]
        summary[m] = {"graphs": len(have)}
        for n in args.evidence:
            vals = [x for rec in have for x in rec["cond"][m][n]]
            cov = [x for rec in have for x in rec["coverage"][m][n]]
            per_graph = [float(np.mean(rec["cond"][m][n])) for rec in have]
            summary[m][n] = {"mean": float(np.mean(vals)), "sd": float(np.std(vals)),
                             "se_graphs": float(np.std(per_graph) / max(1, len(per_graph) - 1) ** 0.5)
                             if len(per_graph) > 1 else float("nan"),
                             "coverage": float(np.mean(cov))}
        summary[m]["auroc"] = float(np.mean([rec["auroc"][m] for rec in have]))
        pm = [rec["paper_metrics"] for rec in runs if "paper_metrics" in rec and m in rec["paper_metrics"]["eshd"]]
        if pm:
            summary[m]["paper_metrics"] = {k: float(np.mean([x[k][m] for x in pm])) for k in
                                           ("eshd", "auroc", "mll", "mse_ce")}
            summary[m]["paper_metrics"]["graphs"] = len(pm)
    payload = {"settings": vars(args), "paper_table2": PAPER, "summary": summary, "runs": runs}
    path = os.path.join(sc.RESULTS, f"{result_name(args)}.json")
    os.makedirs(sc.RESULTS, exist_ok=True)
    payload["environment"] = sc.environment()
    with open(path, "w") as f:
        json.dump(payload, f, indent=1, default=float)
    print("wrote", path, flush=True)
    return json.loads(json.dumps(payload, default=float))


LABEL = {"exact": "exact DP (ceiling), edge prior", "exact_fair": "exact DP (ceiling), fair prior",
         "spn_greedy": "circuit, greedy exact splits", "spn_exact": "circuit on exact order samples",
         "spn_fit": "circuit on `fit`'s orders", "spn_random": "circuit on random splits",
         "spn_greedy_fair": "circuit, greedy exact splits, fair prior",
         "spn_exact_fair": "circuit on exact order samples, fair prior",
         "fit_samples": "`fit` samples (1000), sample-based",
         "spn_mcmc": "circuit on order-MCMC orders", "mcmc_samples": "order-MCMC DAG samples (1000), sample-based",
         "dibs_samples": "DiBS (20 particles, mixture weights), sample-based"}


def _table2(payload, with_paper=True):
    s = payload["settings"]
    ns = s["evidence"]
    summ = payload["summary"]
    head = "| method | graphs | " + " | ".join(f"{n} evidence edges" for n in ns) + " | coverage (" + \
           "/".join(str(n) for n in ns) + ") | unconditional AUROC |"
    lines = [head, "|" + "---|" * (len(ns) + 4)]
    for m, row in summ.items():
        cells = [f"{row[str(n)]['mean']:.3f} ± {row[str(n)]['sd']:.3f}" for n in ns]
        cov = "/".join(f"{row[str(n)]['coverage']:.2f}" for n in ns)
        lines.append(f"| {LABEL.get(m, m)} | {row['graphs']} | " + " | ".join(cells) +
                     f" | {cov} | {row['auroc']:.3f} |")
    if with_paper:
        for name, vals in payload["paper_table2"].items():
            vals = {int(k): v for k, v in vals.items()}
            lines.append(f"| paper: {name} | 30 | " + " | ".join(f"{vals[n]:.3f}" if n in vals else "–"
                                                               for n in ns) + " | | |")
    return "\n".join(lines)


def _fig2(payload):
    lines = ["| method | graphs | E-SHD (CPDAG) | AUROC | held-out MLL | MSE of causal effects |", "|---|---|---|---|---|---|"]
    for m, row in payload["summary"].items():
        pm = row.get("paper_metrics")
        if pm:
            lines.append(f"| {LABEL.get(m, m)} | {pm['graphs']} | {pm['eshd']:.1f} | {pm['auroc']:.3f} | "
                         f"{pm['mll']:.1f} | {pm['mse_ce']:.4f} |")
    return "\n".join(lines)


def _d32_text(path, old_path, cand_path):
    """The README's d = 32 block: the candidate selection's recall against K, the run on the greedy candidates and
    the earlier run on 12 pairwise candidates beside it."""
    import numpy as np

    if not os.path.exists(path):
        return ""
    with open(path) as f:
        p32 = json.load(f)
    r32, s32 = p32["runs"], p32["settings"]
    ns = s32["evidence"]
    recall = ""
    if os.path.exists(cand_path):
        with open(cand_path) as f:
            cr = json.load(f)
        rows = cr["rows"]
        names = list(dict.fromkeys(r["selection"] for r in rows))
        lines = ["| selection | K | recall of the true parents | P(evidence inside the sets), " +
                 " / ".join(f"{n}" for n in ns) + " true edges | selection CPU s per graph |", "|---|---|---|---|---|"]
        for name in names:
            for K in cr["settings"]["Ks"]:
                rs = [r for r in rows if r["selection"] == name and r["K"] == K]
                ins = " / ".join(f"{np.mean([r['evidence_inside'][str(n)] for r in rs]):.2f}" for n in ns)
                lines.append(f"| {name} | {K} | {np.mean([r['recall'] for r in rs]):.3f} | {ins} | "
                             f"{np.mean([r['cpu_s'] for r in rs]):.2f} |")
        recall = ("Candidate selection against K on the same graphs (`--candidate-recall`; mean over "
                  f"{cr['settings']['graphs']} graphs; 'P(evidence inside)' = chance that n random true edges all "
                  "have their parent among the candidates, the ceiling of every candidate-restricted method's "
                  "coverage):\n\n" + "\n".join(lines) + "\n\n")
    old = ""
    if os.path.exists(old_path):
        with open(old_path) as f:
            po = json.load(f)
        so = po["summary"]
        lines = []
        for m, row in so.items():
            cells = " | ".join(f"{row[str(n)]['mean']:.3f}" for n in ns)
            cov = "/".join(f"{row[str(n)]['coverage']:.2f}" for n in ns)
            lines.append(f"| {LABEL.get(m, m)} (K = 12 pairwise) | {row['graphs']} | {cells} | {cov} | "
                         f"{row['auroc']:.3f} |")
        rec_old = np.mean([r["candidate_recall"] for r in po["runs"]])
        old = (f"The earlier run on 12 pairwise candidates per node (recall {rec_old:.2f}; same graphs and "
               "evidence sets, results/structure_trust_d32_pairwise12.json):\n\n| method | graphs | " +
               " | ".join(f"{n} evidence edges" for n in ns) + " | coverage | unconditional AUROC |\n|" +
               "---|" * (len(ns) + 4) + "\n" + "\n".join(lines) + "\n\n")
    cpu = [r["cpu_s"]["total"] for r in r32 if "total" in r.get("cpu_s", {})]
    loads = [r["load_average"][0] for r in r32]
    sel = r32[0].get("selection", "pairwise")
    how = ("the greedy selection of Viinikka et al. 2020 (`candidate_tables(selection='greedy')`: parent sets\nup to "
           "4 scored in the search, the reverse-direction tier of the first 8)" if sel == "greedy"
           else "the single-parent BGe score gain")
    return f"""### d = 32 (candidate parent sets)

{len(r32)} graph(s), {s32['repeats']} evidence sets per size; K = {tuple(s32['expansion'])} (the paper's d = 32
setting); candidate sets of {s32['candidates']} parents per node by {how} (recall of the true parents:
{np.mean([r['candidate_recall'] for r in r32]):.2f}; the paper: 16 candidates by Gadget's greedy heuristic); edge prior unless
marked; splits at the root from 1000 order-MCMC orders (`order_mcmc`, 20 steps per kept order), exact greedy
splits in the sub-problems of ≤ 20 variables. No exact DP at this size. Effects from 1000 circuit samples, E-SHD
from 200.

{_table2(p32, with_paper=False)}

{_fig2(p32)}

{old}{recall}Seconds per graph (mean wall-clock; load average {min(loads):.1f}-{max(loads):.1f} on the 2 cores): tables
{np.mean([r['time_s']['tables'] for r in r32]):.0f}, order MCMC {np.mean([r['time_s']['order_mcmc'] for r in r32]):.0f},
greedy circuit build {np.mean([r['time_s']['spn_greedy_build'] for r in r32]):.0f}, one conditional query on it
{np.mean([r['time_s']['queries']['spn_greedy'] for r in r32]) / (len(ns) * s32['repeats']):.2f}; whole graph (tables,
oracle, three circuits, all queries and metrics) {np.mean([r['time_s']['total_v2'] for r in r32]):.0f} s wall,
{np.mean(cpu) if cpu else float('nan'):.0f} CPU s (process_time). Target "d = 32 runs in ≤ 30 minutes": a graph with
everything above takes {np.mean(cpu) / 60 if cpu else float('nan'):.1f} CPU minutes, the whole {len(r32)}-graph run
{np.sum(cpu) / 60 if cpu else float('nan'):.1f}.
Reproduce: `python benchmarks/structure_trust.py --d 32 --expansion 32 8 2 6 2 --candidates {s32['candidates']}
--graphs {len(r32)} --repeats {s32['repeats']}` and `... --d 32 --graphs {len(r32)} --candidate-recall`.
"""


def write_readme(payload):
    import numpy as np

    from common import write_readme_section

    s = payload["settings"]
    runs = payload["runs"]
    v2 = [r for r in runs if r.get("v2")]

    def mean_t(key, rs):
        vals = [r["time_s"][key] for r in rs if key in r["time_s"]]
        return float(np.mean(vals)) if vals else float("nan")

    def q_per(m, rs):
        vals = [r["time_s"]["queries"][m] for r in rs if m in r["time_s"].get("queries", {})]
        return float(np.mean(vals)) / (len(s["evidence"]) * s["repeats"]) if vals else float("nan")

    full = [r for r in v2 if "fit" in r["time_s"]]
    t_tab = mean_t("exact_posterior_v2", v2)
    e2e_exact = t_tab + mean_t("spn_exact_build", v2) + q_per("spn_exact", v2) * len(s["evidence"]) * s["repeats"]
    e2e_fit = mean_t("fit", full) + t_tab + mean_t("spn_fit_build", full) + \
        q_per("spn_fit", full) * len(s["evidence"]) * s["repeats"]
    d32 = _d32_text(os.path.join(sc.RESULTS, "structure_trust_d32.json"),
                    os.path.join(sc.RESULTS, "structure_trust_d32_pairwise12.json"),
                    os.path.join(sc.RESULTS, "structure_trust_d32_candidates.json"))
    text = f"""## Conditional edge queries (TRUST setting): `benchmarks/structure_trust.py`

Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML), Table 2 and Fig. 2: ER DAGs,
2d expected edges, weights N(0, 1), noise variance 0.1, N = 100 training and 1000 test points, BGe (α_μ = 1,
α_w = d + 2, T = ½ I: the paper's hyperparameters, which are also the library's); data standardised (the library's
default). Condition on n random true edges, AUROC of the conditional probabilities of the unspecified pairs (mean ± sd
over graphs × {s['repeats']} evidence sets; the paper: 30 graphs). Evidence a method gives probability 0 falls back to its
unconditional probabilities (the paper's rule); coverage = fraction of evidence sets with nonzero probability.
Graph prior: the library's edge prior (`expected_parents` = 1.5) unless marked "fair prior" (p(G_j) ∝ 1 / C(d - 1,
|G_j|), Eggeling et al. 2019, the paper's). Circuits: K = {tuple(s['expansion'])}, closed-form weights, exact circuit
queries; `fit(likelihood='bge', order_score='exact', num_steps={s['fit_steps']})`. One thread on a shared 2-core
machine.

### d = {s['d']}

{_table2(payload)}

Fig. 2 metrics (the paper gives no numbers for them): E-SHD between CPDAGs over 1000 samples, AUROC of the edge
marginals (off-diagonal), held-out MLL = E_q[BGe log evidence of the 1000 test points] (prior-predictive, as the paper;
200 samples), MSE of causal effects = mean over i ≠ j of (BCE(i, j) - [(I - W)^-1]_ij)² with the paper's definition
(exact circuit BCE; exact DP: 1000 exact orders, Rao-Blackwellised; samples: BGe mean weights per sample), the
posteriors' effects rescaled from standardised to raw units:

{_fig2(payload)}

Seconds per graph (mean, under load): BGe tables (all 2^15 parent sets per node, scored as candidate tables with
every node a candidate, then both exact DPs) {t_tab:.0f}; `fit` {mean_t('fit', full):.0f}; circuit builds
{mean_t('spn_greedy_build', v2):.1f} (greedy) / {mean_t('spn_exact_build', v2):.1f} (exact orders, drawing them
included); one conditional query: exact DP {q_per('exact', v2):.2f}, circuit {q_per('spn_exact', v2):.2f}. End to end
(tables + oracle + circuit + the {len(s['evidence']) * s['repeats']} conditional queries): circuit on exact orders
{e2e_exact:.0f} s, circuit on `fit`'s orders {e2e_fit:.0f} s. Exact posterior mass of the supported orders
(`OrderSPN.coverage`, edge prior): {np.mean([r['spn_coverage']['spn_greedy'] for r in runs]):.3g} (greedy),
{np.mean([r['spn_coverage']['spn_exact'] for r in runs]):.3g} (exact orders).

{d32}
{payload.get("note", "")}

Reproduce: `python benchmarks/structure_trust.py --graphs {len(runs)} --repeats {s['repeats']} --resume`
(results/structure_trust.json; `--only G ...` runs single graphs).
"""
    write_readme_section("structure_trust", text)


if __name__ == "__main__":
    main()
