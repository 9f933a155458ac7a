"""Regenerate ``benchmarks/README.md`` from the JSON files in ``benchmarks/results/`` (reads them; runs nothing).

    python benchmarks/report.py                # rewrite benchmarks/README.md
    python benchmarks/report.py --check        # exit 1 when benchmarks/README.md is not what the JSON gives
    python benchmarks/report.py --out PATH     # write elsewhere

One section per question a user asks: the command that reproduces it, one summary table built from the JSON and a
few lines of conditions, caveats and targets. Every number in the README comes from the JSON, except the papers'
published values and the targets quoted beside the measurements: those are the constants ``PUBLISHED`` and
``TARGETS`` below, or are read from the benchmark script that compares against them (``script_constant``). The
output is deterministic (sorted inputs, fixed formats, no dates of its own).

Every ``benchmarks/results/**/*.json`` (except ``*_quick.json``) is read by some section or listed in
``NOT_REPORTED`` with the reason; ``tests/test_benchmarks_report.py`` checks both that and that the committed
README equals :func:`generate`'s output. The benchmark scripts call :func:`write` after writing their JSON (through
``common.write_readme_section`` and ``structure_common.write_readme_block``).
"""
import argparse
import ast
import glob
import json
import math
import os
import statistics
import sys
import textwrap
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md")

# ----------------------------------------------------------------------------------------------------------------
# Published values and targets (not measurements). Everything else in the README is read from the JSON.
# ----------------------------------------------------------------------------------------------------------------
#: Values the papers report, quoted beside our measurements where the benchmark scripts do not hold them.
PUBLISHED = {
    # Perlino et al. 2026, arXiv:2607.09645, Table 1 / Fig. 14 (latent collider): DAG-VI vs DAG-SVI.
    "collider": {"rmse": (0.114, 0.055), "crps": (0.075, 0.060), "abs_corr": (0.02, 0.93),
                 "parent_var": ("1e-4", "0.16")},
    # Perlino et al. 2026, Table 4 (heavy-ion emulator, HF-scarce): RMSE of DAG-SVI and DAG-VI.
    "hf_scarce_rmse": {"DAG-SVI": 1.74e-2, "DAG-VI": 2.50e-2},
    # Perlino et al. 2026, Tables 5-6 (pooled joint protocol): weighted energy score of DAG-SVI and DAG-VI.
    "pooled_es": {"DAG-SVI": 0.158, "DAG-VI": 0.162},
}
#: Targets the benchmarks were run against (thresholds of the project, or the best published value to beat).
TARGETS = {
    "nuts_vs_elbo": 3.0,                                     # issue 43: a potential gradient within 3x a DAGELBO one
    "tree_ratio": 2.0, "tree_slope": 1.05,                   # default estimator: within 2x mean field, slope <= 1.05
    "collider_svi_3000_s": 30.0, "collider_recipe_s": 10.0,  # seconds, one thread
    "collider_recipe_ab": 0.7,                               # issue 36: new / old training time of the recipe
    "chain_ratio": 0.8,                                      # pyro_dag / GPyTorch seconds per step
    "nuts_rhat": 1.01, "nuts_ess": 400, "nuts_cpu_s": 600,   # every inducing output and hyperparameter; 4 chains
    "sbc_alpha": 0.05,
    "quickstart": {"rmse_observed": 0.01, "rmse_held_out": 0.02, "var": (0.14, 0.17), "final_elbo": 180},
    "poor_fit_rmse": 0.02,                                   # observed-case child RMSE of a poor collider fit
    "mf_chains": 4,                                          # chains where pyro_dag <= emukit's best RMSE (of 6)
    "sem_corr": 0.9,
    "lamp_wins": 7,                                          # functions (of 10) with LaMP RMSE <= DSVI at n = 500, 1000
    "trust_minutes_d16": 10, "trust_minutes_d32": 30,
    "structure_fold_s": 600,
    "pareto_k": 0.7, "halves_rhat": 1.05,                    # PSIS reliability; a chain stationary in itself
    "epsr": 1.1,                                             # the usual split-EPSR rule
    "lamp_target_ns": (500, 1000), "lamp_time_n": 1000,      # sizes of the accuracy and of the time targets
    "lamp_gp_functions": ("schaffer", "g4", "g6"),           # where LaMP should beat a single GP
}

#: Results that no section reads, with the reason.
NOT_REPORTED = {
    "collider_noise_step.json": "the opt-in noise_step on collider data set 0 before candidate starts (tree of f653aa0); "
                                "docs/guide/training.rst quotes it beside the runs with candidate starts",
    "col_ng_a.json": "runs merged into collider.json (its settings.merge), which the collider section reads",
    "col_ng_c.json": "runs merged into collider.json (its settings.merge), which the collider section reads",
    "quickstart_data_seeds.json": "the Quickstart script on data sets 0-4; collider_data_seeds.json runs the same "
                                  "recipe on the same data sets (and more) and is the one reported",
    "multifidelity_hf_scarce_graphical.json": "one repetition, superseded by multifidelity_hf_scarce_graphical3.json "
                                              "(three repetitions; its repetition 0 is this run)",
}
#: Folders of per-run files that a script aggregates into one results file (the aggregate is reported).
PER_RUN_FOLDERS = {
    "lamp_functions": "per-cell files aggregated by lamp_functions.py into lamp_functions.json (the collider_*.json "
                      "cells are read directly by the LaMP section)",
    "sachs_regression": "per-run files aggregated by sachs_regression.py into sachs_regression.json",
}


# ----------------------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------------------
class Results:
    """Reads ``benchmarks/results`` and records which files each section used."""

    def __init__(self, folder=RESULTS):
        self.folder = folder
        self.used = set()
        self.log = []     # every read, in order: which files each section read (for its staleness line)
        self._cache = {}

    def __call__(self, name):
        self.used.add(name)
        self.log.append(name)
        if name not in self._cache:
            with open(os.path.join(self.folder, name), encoding="utf-8") as f:
                self._cache[name] = json.load(f)
        return self._cache[name]

    def glob(self, pattern):
        names = sorted(os.path.relpath(p, self.folder) for p in glob.glob(os.path.join(self.folder, pattern)))
        return [n for n in names if not n.endswith("_quick.json")]


def script_constant(path, name):
    """A literal constant of a benchmark script (or library module), read without importing it."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{name} not found in {path}")


# ----------------------------------------------------------------------------------------------------------------
# Which library tree each section was measured on (issue 41, item 6: tables that cannot go stale)
# ----------------------------------------------------------------------------------------------------------------
def _tree_state():
    """``benchmarks/tree_state.py`` (standard library only), loaded whichever way this module was."""
    import importlib.util

    name = "pyro_dag_benchmarks_tree_state"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "tree_state.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def current_tree():
    """The git tree hash of the library as it is on disk (``tree_state.working_tree_hash``; ``git rev-parse
    HEAD:pyro_dag`` when it has no uncommitted changes)."""
    return _tree_state().working_tree_hash()


_COMMIT_TREES = {}


def commit_tree(commit):
    """``git rev-parse COMMIT:pyro_dag`` (cached), ``None`` when git does not know the commit."""
    if commit not in _COMMIT_TREES:
        _COMMIT_TREES[commit] = _tree_state().tree_of_commit(commit)
    return _COMMIT_TREES[commit]


def _modules(used):
    """The sorted tuple of library files of a ``used`` record (``tree_state.library_used``), or ``None`` when there
    is none, it is empty, or its process started others."""
    if isinstance(used, dict) and not used.get("spawned", True) and isinstance(used.get("modules"), list) \
            and used["modules"]:
        return tuple(sorted(used["modules"]))
    return None


def _from_code(code):
    """``(tree, commit, exact, modules)`` from a ``code`` record (``common.code_state``): its ``tree``; for records
    older than the tree field, the commit's library tree when no library file differed from the commit (exact), else
    the commit's tree as a lower bound on what changed (not exact). ``modules``: the library files the measuring
    process ran (``code["used"]``, ``common.write_json``) as a sorted tuple, ``None`` where not recorded or where the
    process started others (whose modules it could not see)."""
    commit = code.get("commit") or None
    modules = _modules(code.get("used"))
    if code.get("tree"):
        return code["tree"], commit, True, modules
    if commit:
        return commit_tree(commit), commit, not code.get("modified"), None
    return None, None, False, None


def measurement_states(data):
    """What a results file records about the library it measured: a list of ``(tree, commit, exact, modules)``, one
    per run or row that records it differently (``tree`` None: not recorded; ``modules``: :func:`_from_code`). Read
    in order: per-row ``code_tree`` (with ``code_used``) / ``code`` (files whose rows or runs come from several
    runs), the file's ``code``, a bare ``commit`` / ``git_commit`` (uncommitted edits not recorded: not exact)."""
    if not isinstance(data, dict):
        return [(None, None, False, None)]
    if data.get("reference_commit"):
        # a deliberate "before" reference, measured on an exact archive of that commit and labelled with it where
        # it is shown: it does not make the section that compares against it stale
        return []
    def records(rows):
        return any(isinstance(r, dict) and ("code_tree" in r or isinstance(r.get("code"), dict)) for r in rows)

    # the first of "rows" / "runs" that records its trees (a file may keep its results in rows, its runs' trees in runs)
    rows = next((data[k] for k in ("rows", "runs") if isinstance(data.get(k), list) and records(data[k])), [])
    if rows:
        out = []
        for r in rows:
            if not isinstance(r, dict):
                continue
            if r.get("code_tree"):   # zoo.py's rows: the tree and (since it was recorded) the modules run
                out.append((r["code_tree"], None, True, _modules(r.get("code_used"))))
            elif isinstance(r.get("code"), dict):
                out.append(_from_code(r["code"]))
            else:
                out.append((None, None, False, None))
        return sorted(set(out), key=str)
    if isinstance(data.get("code"), dict):
        return [_from_code(data["code"])]
    commit = data.get("git_commit") or data.get("commit")
    if isinstance(commit, str) and commit:
        commit = commit.split("+")[0]
        return [(commit_tree(commit), commit, False, None)]
    return [(None, None, False, None)]


def same_code(measured, tree, modules=None):
    """Whether library tree ``measured`` runs the same code as ``tree``, the current one on disk
    (``tree_state.same_code``), in every file or, given ``modules``, in the files the measurement ran and the
    library's data files; ``False`` when ``tree`` is not the library on disk (a test's made-up tree) or git does not
    have ``measured``."""
    if "disk" not in _DISK_TREE:   # hashing the library's files once per report, not once per section
        _DISK_TREE["disk"] = current_tree()
    return tree == _DISK_TREE["disk"] and bool(_tree_state().same_code(measured, modules=modules))


_DISK_TREE = {}


def short(h):
    return h[:10] if h else "?"


def staleness(states, tree):
    """``(status, line)`` of a section from its files' ``measurement_states``: ``"current"`` (every run recorded
    the current tree), ``"stale"`` (a run recorded, or its commit had, another library tree), ``"not recorded"``."""
    states = [tuple(s) + (None,) * (4 - len(s)) for s in states]   # (tree, commit, exact[, modules])
    # a tree that differs from the current one in docstrings and comments only, or only in modules the measurement
    # did not run, measured the same code
    same_states = [s for s in states if s[0] and s[2] and s[0] != tree and same_code(s[0], tree, s[3])]
    same = sorted({s[0] for s in same_states})
    partial = sorted({s[0] for s in same_states if s[3] is not None})
    recorded = sorted({tree if s in same_states else s[0] for s in states if s[0] and s[2]})
    approx = sorted({(t, c) for t, c, exact, _ in states if t and not exact})
    missing = [s for s in states if s[0] is None]
    other = [t for t in recorded if t != tree] + [t for t, _ in approx if t != tree]
    if other:
        trees = ", ".join(f"`{short(t)}`" for t in recorded if t != tree)
        commits = ", ".join(f"`{short(c)}`" for t, c in approx if t != tree)
        where = " and ".join(x for x in (f"library tree {trees}" if trees else "",
                                         f"commit {commits} (uncommitted library edits not recorded)" if commits
                                         else "") if x)
        also = []
        if any(t == tree for t in recorded):
            also.append("some of it on the current tree")
        if missing:
            also.append("some of it without a record of the tree")
        return "stale", para(f"**Stale:** measured on {where}{' (' + '; '.join(also) + ')' if also else ''}; the "
                         f"library has changed since (current tree `{short(tree)}`). Re-run the command to "
                         "refresh these numbers.")
    if missing or approx:
        part = " for part of its rows" if recorded else ""
        commits = ", ".join(f"`{short(c)}`" for _, c in approx)
        at = f" (run at commit {commits}, whose library tree is the current one; uncommitted edits not recorded)" \
            if commits else ""
        return "not recorded", para(f"**Tree not recorded{part}:** the JSON do not record which library tree these "
                                f"numbers were measured on{at}; the library may have changed since.")
    if same:
        which = "in docstrings and comments only" if not partial else \
            "only in docstrings, comments and modules the measurement did not load"
        return "current", (f"*Measured on library tree {', '.join(f'`{short(t)}`' for t in same)}, which differs "
                           f"from the current one (`{short(tree)}`) {which}: the same code.*")
    return "current", f"*Measured on the current library tree `{short(tree)}`.*"


# ----------------------------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------------------------
def f(x, d=3):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{d}f}"


def g(x, s=3):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{s}g}"


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def se(xs):
    xs = [x for x in xs if x is not None]
    return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")


def mse(xs, d=3, scale=1.0):
    """Mean ± standard error (the value alone for one)."""
    m, s = mean(xs) * scale, se(xs) * scale
    return f(m, d) if math.isnan(s) else f"{f(m, d)} ± {f(s, d)}"


def rng(xs, d=3):
    lo, hi = min(xs), max(xs)
    return f(lo, d) if f(lo, d) == f(hi, d) else f"{f(lo, d)}-{f(hi, d)}"


def yes(b, good="met", bad="**missed**"):
    return good if b else bad


def table(head, rows):
    for cell in list(head) + [c for row in rows for c in row]:
        if "|" in str(cell):
            raise ValueError(f"a table cell holds '|', which would split it: {cell!r}")
    if any(len(row) != len(head) for row in rows):
        raise ValueError(f"table rows of other lengths than the header ({len(head)} columns)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def sec_collider_default_streams(R):
    d = R("collider_default_streams.json")
    runs = [r for r in d["runs"] if r.get("child_kernel", "default") == "default"]
    t = d["targets"]
    steps = runs[0]["steps"]
    base = {b["data_seed"]: b for b in R("collider_exact_gp_baseline.json")["runs"]}
    rows, lengths = [], sorted({int(k) for r in runs for k in r["along"]})
    for r in sorted(runs, key=lambda r: (r["precision"], r["data_seed"], r["stream"])):
        fin = r["final"]
        along = [f(r["along"][str(k)]["rmse_test"]) if str(k) in r["along"] else "–" for k in lengths]
        fb = r.get("fallback")
        rows.append([r["precision"], r["data_seed"], r["stream"], *along, f(fin["rmse_test"]),
                     f(fin["mean_predictor_rmse"]), f(base[r["data_seed"]]["rmse_test"]) if r["data_seed"] in base
                     else "–", f"{fin['noise_factor']:.1f}x", f(fin["parent_var"], 4),
                     f(fin["mean_abs_corr"], 2), calib_cell(fin), f"{r['cpu_s']:.0f}",
                     len(r.get("rollbacks", [])) if "rollbacks" in r else
                     ("yes" if "RollbackWarning" in r["warnings"] else "no"),
                     r["restored_step"] if r["restored_step"] is not None else "–",
                     r.get("noise_steps", "n.r."), "–" if not fb else fb.get("kept", "?"), _candidates_cell(r)])
    tab = table(["guide", "data", "stream"] + [f"held-out RMSE at step {k}" for k in lengths]
                + [f"held-out RMSE at step {steps} (returned)", "mean predictor", "exact GP on (x1, x2)",
                   "noise / truth",
                   "parents' var", "mean abs corr", f"held out {CALIB_HEAD}", "CPU s", "rollbacks",
                   "restored to", "noise steps", "fallback kept", "candidates' losses (kept)"], rows)
    chordal = [r for r in runs if r["precision"] == "chordal"]
    share = {}
    for k in lengths:
        vals = [r["along"][str(k)] for r in chordal if str(k) in r["along"]]
        share[k] = (sum(v["rmse_test"] <= t["rmse_test"] for v in vals), len(vals),
                    sum(v["rmse_test"] < v["mean_predictor_rmse"] for v in vals),
                    sum(v["noise_factor"] <= t["noise_factor"] for v in vals))
    final = [r["final"] for r in chordal]
    ok_final = sum(x["rmse_test"] <= t["rmse_test"] for x in final)
    never_worse = sum(x["rmse_test"] < x["mean_predictor_rmse"] for x in final)
    noise_ok = sum(x["noise_factor"] <= t["noise_factor"] for x in final)
    worst = max(final, key=lambda x: x["rmse_test"]) if final else None
    mf = [r["final"] for r in runs if r["precision"] == "mean_field"]
    notes = [para(f"""`DAGDGP(ds.graph)`, `AutoStructuredGuide(model)` and `train(..., num_steps={steps})` on
        `collider(seed=data)` with `pyro.set_rng_seed(stream)`: no kernel or noise given, one thread. The held-out RMSE of
        the noise-free child is read at the steps named along the way (the parameters at that step, before the final
        best-window restoration and before a fallback run is decided) and at the end (what `train` returned). A
        column along the way is not what `train(num_steps=that)` returns: the default noise steps start at half of
        `num_steps` (here after step {steps // 2}), so an earlier column has had none; the runs of
        `train(num_steps=1500)` itself are in the paragraph below the table when measured. Chordal runs with held-out RMSE <= {t['rmse_test']} / better than the mean predictor / noise within
        {t['noise_factor']}x the truth: """
                  + ", ".join(f"{a} / {c} / {n} of {b} at step {k}" for k, (a, b, c, n) in share.items())
                  + f""", {ok_final} / {never_worse} / {noise_ok} of {len(final)} as returned at step {steps}
        (worst {f(worst['rmse_test']) if worst else '–'} against a mean predictor of
        {f(worst['mean_predictor_rmse']) if worst else '–'}). Parents' posterior variance
        {rng([x['parent_var'] for x in final], 4)} and mean |corr(w1, w2)| {rng([x['mean_abs_corr'] for x in final], 2)}
        (targets >= {t['parent_var']} and >= {t['mean_abs_corr']}, at least 3x mean field's"""
                  + (f": mean field {rng([x['parent_var'] for x in mf], 4)} / {rng([x['mean_abs_corr'] for x in mf], 2)})."
                     if mf else "; the mean-field comparison is in the next section).")
                  + " The baseline a user already has, an exact GP of the child on both roots (`ExactGP`, "
                  + "`--baseline`), per data set: "
                  + "; ".join(f"{k}: {f(b['rmse_test'])} (PICP95 {f(b['picp95'], 2)})" for k, b in sorted(base.items()))
                  + ". " + d.get("note", ""))]
    notes += _short_runs(R, t)
    long = R("collider_default_streams_6000.json")["runs"]
    if len(long) > 5:   # the grid: counts against the targets, and the runs that miss
        fin = [r["final"] for r in long]
        band = [PICP_BAND[0] <= x["picp95"] <= PICP_BAND[1] for x in fin]
        misses = [f"data {r['data_seed']} stream {r['stream']}: {f(r['final']['rmse_test'])}" for r in long
                  if r["final"]["rmse_test"] > t["rmse_test"]]
        out_band = [f"data {r['data_seed']} stream {r['stream']}: {r['final']['picp95']:.2f}"
                    for r, b in zip(long, band) if not b]
        notes.append(para(f"""`train(num_steps=6000)` (`--steps 6000 --at 1500 3000 --name
            collider_default_streams_6000`, `results/collider_default_streams_6000.json`, {len(long)} runs):
            held-out RMSE <= {t['rmse_test']} on {sum(x['rmse_test'] <= t['rmse_test'] for x in fin)}/{len(long)}
            ({'; '.join(misses) or 'no miss'}), never worse than the mean predictor on
            {sum(x['rmse_test'] < x['mean_predictor_rmse'] for x in fin)}/{len(long)}, noise within
            {t['noise_factor']}x the truth on {sum(x['noise_factor'] <= t['noise_factor'] for x in fin)}/{len(long)},
            PICP95 in [{PICP_BAND[0]}, {PICP_BAND[1]}] on {sum(band)}/{len(long)} ({'; '.join(out_band) or 'none outside'}); parents' posterior variance
            {rng([x['parent_var'] for x in fin], 4)}, mean |corr(w1, w2)| {rng([x['mean_abs_corr'] for x in fin], 2)}.
            Read along the same runs (the noise steps of a 6000-step run start at step 3000, so these are not what
            `train(num_steps=that)` returns): <= {t['rmse_test']} at step 1500 on
            {sum(r['along']['1500']['rmse_test'] <= t['rmse_test'] for r in long)}, at step 3000 on
            {sum(r['along']['3000']['rmse_test'] <= t['rmse_test'] for r in long)}."""))
    else:
        notes.append(para("Longer runs (`--name collider_default_streams_6000 --steps 6000 --at 1500 3000`, "
                      "`results/collider_default_streams_6000.json`): " + "; ".join(
                          f"data {r['data_seed']} stream {r['stream']}: "
                          + " / ".join(f(r["along"][k]["rmse_test"]) for k in sorted(r["along"], key=int))
                          + f" / {f(r['final']['rmse_test'])} (returned) at steps "
                          + " / ".join(sorted(r["along"], key=int)) + f" / {r['steps']}, noise "
                          f"{r['final']['noise_factor']:.1f}x, candidates {_candidates_cell(r)}" for r in long) + "."))
    return Section("Is the latent collider with default kernels right on every run?",
                   "`python benchmarks/collider_default_streams.py --data-seeds 0-4 --streams 0-4 --steps 3000 --at 1500 "
                   "3000` and `--baseline`", tab, notes,
                   ["collider_default_streams.json", "collider_exact_gp_baseline.json",
                    "collider_default_streams_6000.json"]
                   + (["collider_default_streams_1500.json"] if "collider_default_streams_1500.json" in R.used else []))


def _short_runs(R, t):
    """A paragraph on the grid of ``train(num_steps=1500)`` runs, when ``collider_default_streams_1500.json``
    exists."""
    import os as _os

    if not _os.path.exists(_os.path.join(R.folder, "collider_default_streams_1500.json")):
        return []
    runs = [r for r in R("collider_default_streams_1500.json")["runs"] if r["precision"] == "chordal"]
    fin = [r["final"] for r in runs]
    ok = sum(x["rmse_test"] <= t["rmse_test"] for x in fin)
    never = sum(x["rmse_test"] < x["mean_predictor_rmse"] for x in fin)
    noise = sum(x["noise_factor"] <= t["noise_factor"] for x in fin)
    band = sum(0.88 <= x["picp95"] <= 0.99 for x in fin)
    cells = "; ".join(f"{r['data_seed']}/{r['stream']}: {f(r['final']['rmse_test'])}" for r in
                      sorted(runs, key=lambda r: (r["data_seed"], r["stream"])))
    return [para(f"""`train(num_steps=1500)` itself (`--steps 1500 --at --name collider_default_streams_1500`,
        `results/collider_default_streams_1500.json`, its noise steps after step 750): held-out RMSE <=
        {t['rmse_test']} on {ok} of {len(fin)} runs, better than the mean predictor on {never}, noise within
        {t['noise_factor']}x the truth on {noise}, PICP95 in [0.88, 0.99] on {band}. Per run, data/stream: {cells}.""")]


def sec_collider_noise_step_ab(R):
    on, off = R("collider_noise_step_ab_auto.json"), R("collider_noise_step_ab_off.json")
    t = on["targets"]
    pairs = {(r["data_seed"], r["stream"]): r for r in off["runs"]}
    rows = []
    for r in sorted(on["runs"], key=lambda r: (r["data_seed"], r["stream"])):
        o = pairs.get((r["data_seed"], r["stream"]))
        if o is None:
            continue
        rows.append([r["data_seed"], r["stream"], f(r["along"]["1500"]["rmse_test"]) if "1500" in r["along"] else "–",
                     f(o["final"]["rmse_test"]), f(r["final"]["rmse_test"]), f"{o['final']['noise_factor']:.1f}x",
                     f"{r['final']['noise_factor']:.1f}x", f(o["final"]["picp95"], 2), f(r["final"]["picp95"], 2),
                     r.get("noise_steps", "n.r."), r["natural_gradient_stopped"] or "–"])
    tab = table(["data", "stream", "held-out RMSE at step 1500 (both)", "held-out RMSE, False", "held-out RMSE, 'auto'",
                 "noise / truth, False", "noise / truth, 'auto'", "PICP95, False", "PICP95, 'auto'",
                 "noise steps ('auto')", "natural-gradient phase stopped at ('auto')"], rows)

    def count(runs, key, ok):
        return sum(ok(x["final"][key]) for x in runs)

    both = [(r, pairs[(r["data_seed"], r["stream"])]) for r in on["runs"] if (r["data_seed"], r["stream"]) in pairs]
    a, b = [r for r, _ in both], [o for _, o in both]
    le = lambda v: v <= t["rmse_test"]  # noqa: E731
    band = lambda v: 0.88 <= v <= 0.99  # noqa: E731
    noise = lambda v: v <= t["noise_factor"]  # noqa: E731
    notes = [para(f"""The latent collider grid of the previous section run twice on one tree, side by side (two processes
        at once, one thread each): `--noise-step auto` (the default since) and `--noise-step off`
        (`train(noise_step=False)`, the noise left to Adam: the default before). The first 1500 steps of the two are the
        same run (the noise steps start in the second half and leave the random stream as it was). Held-out RMSE <=
        {t['rmse_test']}: {count(b, 'rmse_test', le)} of {len(b)} runs without the step, {count(a, 'rmse_test', le)}
        with it; noise within {t['noise_factor']}x the truth: {count(b, 'noise_factor', noise)} and
        {count(a, 'noise_factor', noise)}; PICP95 in [0.88, 0.99]: {count(b, 'picp95', band)} and
        {count(a, 'picp95', band)}. Measured before the two guard fixes that followed (the natural-gradient guard
        restores Adam's moments, and the rollback then starts from the restored state), which changed data set 0's
        streams 0 and 3; the previous section's grid is the default on the current tree.""")]
    return Section("Does the noise step help the collider? (`noise_step='auto'` against `False`)",
                   "`python benchmarks/collider_default_streams.py --data-seeds 0-4 --streams 0-4 --steps 3000 --at 1500 "
                   "--noise-step auto --name collider_noise_step_ab_auto` and `--noise-step off --name "
                   "collider_noise_step_ab_off`", tab, notes,
                   ["collider_noise_step_ab_auto.json", "collider_noise_step_ab_off.json"])


def _candidates_cell(run):
    """The candidate starts' mean losses with the kept one starred, or a dash for a run without them."""
    c = run.get("candidates")
    if not c:
        return "–"
    return " / ".join(("*" if k == c["kept"] else "") + f"{v:.0f}" for k, v in enumerate(c["losses"]))


def sec_collider_explaining_away(R):
    d = R("collider_explaining_away.json")
    runs = list(d["runs"])
    # the default kernel's chordal runs on the same data sets and streams come from the default-streams grid
    pairs = {(r["data_seed"], r["stream"]) for r in runs}
    runs += [r for r in R("collider_default_streams.json")["runs"] if r["precision"] == "chordal"
             and r.get("child_kernel", "default") == "default" and (r["data_seed"], r["stream"]) in pairs]
    rows = []
    for r in sorted(runs, key=lambda r: (r.get("child_kernel", "default"), r["precision"], r["data_seed"],
                                         r["stream"])):
        fin = r["final"]
        rows.append([r.get("child_kernel", "default"), r["precision"], r["data_seed"], r["stream"], r["steps"],
                     f(fin["rmse_test"]), f"{fin['noise_factor']:.1f}x", f(fin["parent_var"], 4),
                     f(fin["mean_abs_corr"], 2), calib_cell(fin), f"{r['cpu_s']:.0f}"])
    tab = table(["child kernel", "guide", "data", "stream", "steps", "held-out RMSE (returned)",
                 "noise / truth", "parents' var", "mean abs corr", f"held out {CALIB_HEAD}", "CPU s"], rows)

    def cell(kernel, precision, key):
        vals = [r["final"][key] for r in runs if r.get("child_kernel", "default") == kernel
                and r["precision"] == precision]
        return rng(vals, 4 if key == "parent_var" else 2) if vals else "not run"

    notes = [para(f"""Explaining-away on the latent collider: the parents' posterior variance and mean |corr(w1, w2)|
        at the cases, chordal against mean-field guide, with the default child kernel (a stationary kernel on the
        pair (w1, w2)) and with `kernels={{"w3": SumInput(RBF())}}` (a kernel on w1 + w2, the structure the data were
        drawn from; its hyperparameters learned as the default's are). Default kernel: chordal
        {cell('default', 'chordal', 'parent_var')} / {cell('default', 'chordal', 'mean_abs_corr')} (from the
        previous section), mean field {cell('default', 'mean_field', 'parent_var')} /
        {cell('default', 'mean_field', 'mean_abs_corr')}. SumInput child: chordal {cell('sum', 'chordal', 'parent_var')}
        / {cell('sum', 'chordal', 'mean_abs_corr')}, mean field {cell('sum', 'mean_field', 'parent_var')} /
        {cell('sum', 'mean_field', 'mean_abs_corr')}. Targets: variance >= 0.05, |corr| >= 0.3, at least 3x mean
        field's. """ + d.get("note", ""))]
    command = (f"`{d['command']}`" if d.get("command") else
               "`python benchmarks/collider_default_streams.py --name collider_explaining_away --child-kernel sum "
               "--data-seeds 0-1 --streams 0-1` (and `--precision mean_field`)")
    return Section("Does the chordal guide keep the collider's explaining-away with learned kernels?", command, tab,
                   notes, ["collider_explaining_away.json"])


def sec_collider_explaining_away_refine(R):
    """The explaining-away recipe of docs/guide/natural_gradients.rst: the default fit, then the posterior refined
    with every kernel hyperparameter and noise held (``collider_default_streams.py --refine N``)."""
    names = [n for n in ("collider_explaining_away_refine.json", "collider_explaining_away_refine_default.json")
             if os.path.exists(os.path.join(R.folder, n))]
    if not names:
        return None
    runs = [r for n in names for r in R(n)["runs"] if r.get("refined")]
    rows = []
    for r in sorted(runs, key=lambda r: (r.get("child_kernel", "default") != "sum", r["data_seed"], r["stream"])):
        a, b = r["final"], r["refined"]["final"]
        rows.append([r.get("child_kernel", "default"), r["data_seed"], r["stream"],
                     f"{r['steps']} + {r['refined']['steps']}", str(r["natural_gradient_stopped"] or "–"),
                     f"{f(a['parent_var'], 3)} → {f(b['parent_var'], 3)}",
                     f"{f(a['mean_abs_corr'], 2)} → {f(b['mean_abs_corr'], 2)}",
                     f"{f(a['rmse_test'])} → {f(b['rmse_test'])}", f"{f(a['picp95'], 2)} → {f(b['picp95'], 2)}",
                     str(r["refined"]["natural_gradient_stopped"] or "–"),
                     f"{r['cpu_s']:.0f} + {r['refined']['cpu_s']:.0f}"])
    tab = table(["child kernel", "data", "stream", "steps (fit + refine)", "fit's natural-gradient phase stopped at",
                 "parents' var: fit → refined", "mean abs corr", "held-out RMSE", "PICP95", "refine's phase stopped",
                 "CPU s"], rows)
    verdicts = []
    for kernel in ("sum", "default"):
        rs = [r for r in runs if r.get("child_kernel", "default") == kernel]
        if not rs:
            continue
        ok = sum(1 for r in rs if r["refined"]["final"]["parent_var"] >= 0.05
                 and r["refined"]["final"]["mean_abs_corr"] >= 0.3)
        ok0 = sum(1 for r in rs if r["final"]["parent_var"] >= 0.05 and r["final"]["mean_abs_corr"] >= 0.3)
        verdicts.append(f"{'SumInput' if kernel == 'sum' else 'default'} child kernel: variance >= 0.05 and |corr| >= "
                        f"0.3 on {ok0} of {len(rs)} fits and {ok} of {len(rs)} refined")
    notes = [para(f"""The default `train(num_steps=3000)` on the collider (data set 0, five streams), then
        `freeze(model.kernels)`, `freeze(model.likelihoods)` and a second `train(..., num_steps=2000,
        candidate_starts=1, start_hidden=False)` on the same model and guide: the natural-gradient phase of the
        second call runs with the hyperparameters held. In the first call, with the hyperparameters moving, the
        natural-gradient guard stops the phase on most runs (the column), and Adam alone shrinks the
        explaining-away direction. {'; '.join(verdicts)}. Target (issue 41): variance >= 0.05 and |corr| >= 0.3, at
        least 3x mean field's (mean field: the section above). One process, the runs one after another, one
        thread. {code_note([R(n) for n in names])}""")]
    return Section("Does refining the posterior with the kernels held keep the collider's explaining-away?",
                   "`python benchmarks/collider_default_streams.py --data-seeds 0 --streams 0-4 --steps 3000 --at "
                   "--child-kernel sum --refine 2000 --name collider_explaining_away_refine` (and without "
                   "`--child-kernel sum`, `--name collider_explaining_away_refine_default`)", tab, notes, names)


def para(text):
    return textwrap.fill(" ".join(text.split()), width=118, break_long_words=False, break_on_hyphens=False)


class Section:
    def __init__(self, title, command, tab, notes, sources):
        self.title, self.command, self.table, self.notes, self.sources = title, command, tab, notes, sources
        self.status, self.status_line = None, None   # set by generate() from the files the section read

    def render(self):
        src = ", ".join(f"`results/{s}`" for s in self.sources[:4])
        if len(self.sources) > 4:
            src = f"{len(self.sources)} files, `results/{common_prefix(self.sources)}*.json`"
        out = [f"### {self.title}", ""]
        if self.status_line:
            out += [self.status_line, ""]
        out += [f"Reproduce: {self.command}. Data: {src}.", "", self.table, ""]
        for n in self.notes:
            out += [n, ""]
        return "\n".join(out)


def common_prefix(names):
    pre = os.path.commonprefix(names)
    return pre[:pre.rfind("_") + 1] if "_" in pre else pre


# ----------------------------------------------------------------------------------------------------------------
# Sections: variational inference, speed, Pyro conformance
# ----------------------------------------------------------------------------------------------------------------
def sec_gradient_variance(R):
    d = R("gradient_variance.json")
    s = d["settings"]
    rows = []
    for r in d["rows"]:
        rows.append(["mean field (DAG-VI)", "collider", s["train_steps"] if r["stage"] == "trained" else 0,
                     g(r["total_grad_var_dagelbo"]), g(r["total_grad_var_dagelbo_antithetic"]), "–",
                     g(r["total_grad_var_trace_elbo"]), f"{r['ratio_trace_over_dagelbo']:.1f}×", "–", "–"])
    factor_over_sqrt = []
    joint_worse = 0
    for r in d["structured"]:
        base = r["var_conditional_sqrt"] * r["cpu_seconds_conditional_sqrt"]
        jw = r["var_joint"] * r["cpu_seconds_joint"] / base
        tw = r["var_trace_elbo"] * r["cpu_seconds_trace_elbo"] / base
        joint_worse += jw > 1
        factor_over_sqrt.append(r["cpu_seconds_conditional"] / r["cpu_seconds_conditional_sqrt"])

        def c(k):
            return f"{g(r['var_' + k])} ({1000 * r['cpu_seconds_' + k]:.0f} ms)"
        rows.append(["chordal (DAG-SVI), sparse", r["problem"], r["train_steps"], c("conditional_sqrt"),
                     g(r["var_antithetic"]), c("joint"), c("trace_elbo"),
                     f"{r['var_trace_elbo'] / r['var_conditional_sqrt']:.1f}×", f"{jw:.2f}", f"{tw:.2f}"])
    ratios = [r["ratio_trace_over_dagelbo"] for r in d["rows"]] + \
        [r["var_trace_elbo"] / r["var_conditional_sqrt"] for r in d["structured"]]
    tab = table(["guide", "problem", "trained steps", "DAGELBO (default sampler)", "DAGELBO, antithetic pairs",
                 "DAGELBO, joint sampler", "Trace_ELBO", "Trace_ELBO / DAGELBO", "joint work", "Trace_ELBO work"],
                rows)
    notes = [para(f"""Total gradient variance over all guide parameters, {s['repeats']} gradient draws per estimator
        with
        {s['num_particles']} samples each, same guide; in brackets CPU ms per gradient. *Work* = variance × CPU seconds
        relative to DAGELBO's default sampler (lower is better). The structured rows' antithetic pairs ran in the sparse
        backend's factor form, which took {rng(factor_over_sqrt, 1)}× the square-root form's CPU time for the same
        estimator. Shared, loaded machine: compare within a row."""),
             para(f"""Trace_ELBO's variance is {rng(ratios, 1)}× DAGELBO's everywhere. The joint sampler is cheaper per
        gradient but noisier (more work on {joint_worse} of {len(d['structured'])} problems), so the conditional sampler
        stays the default.""")]
    return Section("Is DAGELBO's gradient better than Trace_ELBO's?", "`python benchmarks/gradient_variance.py`",
                   tab, notes, ["gradient_variance.json"])


def sec_tree_scaling(R):
    d = R("tree_scaling.json")
    rows = []
    # runs from before the methods were interleaved recorded no memory saved for the backward pass
    saved = all("mean_field_saved_mib" in r for r in d["rows"])
    for r in d["rows"]:
        mf = r["mean_field_cpu_s"]

        def c(k):
            return f"{r[k + '_cpu_s']:.3f}" if k + "_cpu_s" in r else "–"

        def rss(k, what="rss"):
            return f"{r[f'{k}_{what}_mib']:.0f}" if f"{k}_{what}_mib" in r else "–"
        kinds = ("mean_field", "chordal_sparse_sqrt", "chordal_sparse_joint", "chordal_dense")
        row = [r["depth"], r["gp_nodes"], f"{mf:.3f}", c("chordal_dense"), c("chordal_sparse"),
               c("chordal_sparse_sqrt"), c("chordal_sparse_joint"),
               f"{r['chordal_sparse_sqrt_cpu_s'] / mf:.2f}", f"{r['chordal_sparse_joint_cpu_s'] / mf:.2f}",
               " / ".join(rss(k) for k in kinds)]
        if saved:
            row.append(" / ".join(rss(k, "saved") for k in kinds))
        rows.append(row)
    sm = d["summary"]
    sq, fa, jo = sm["conditional_square_root"], sm["conditional"], sm["joint"]
    loads = [r["load"] for r in d["rows"]]
    met = (sq["max_sparse_over_mean_field"] <= TARGETS["tree_ratio"]
           and sq["sparse_loglog_slope"] <= TARGETS["tree_slope"])
    joint_note = '`DAGELBO(sampler="joint")` for large trees.'
    if os.path.exists(os.path.join(R.folder, "sampler_work.json")):
        rule = sampler_rule(R("sampler_work.json")["rows"])
        joint_note = (f"its variance-adjusted work stays above the conditional sampler's on every tree measured, "
                      f"{rule['work_ratio_depth9']:.1f}× at depth 9 on the measured trend, so the conditional "
                      "sampler stays the default (the rule and the numbers: the sampler-work section below).")
    tab = table(["depth", "GP nodes", "mean field (CPU s)", "dense, cond.", "sparse, cond. (factor)",
                 "sparse, cond. (square root, default)", "sparse, joint", "square root / mean field",
                 "joint / mean field", "peak RSS MiB (MF / square root / joint / dense)"] +
                (["saved for backward MiB (MF / square root / joint / dense)"] if saved else []), rows)
    protocol = ("methods interleaved in one process (order rotated each round) after one warm-up call each" if saved
                else "methods side by side in one process")
    memory = ("Peak RSS (of the warm-up call, methods in the columns' order after mean field; it includes the "
              "interpreter, torch and heap kept from earlier calls) and the tensors autograd saved for the backward "
              "pass (distinct storages; what an ELBO holds until its gradient)" if saved else
              "Peak RSS includes the interpreter and torch")
    notes = [para(f"""One ELBO + gradient on binary trees (the DAG-DGP paper's Fig. 2): CPU seconds, median of
        {d['settings']['repeats']} repeats, {protocol}, float64, one thread, dense backend up
        to
        depth {sm['deepest_dense_depth']}. *cond.*: DAGELBO's default sampler (Algorithms 1 and 2), on the sparse
        backend in
        its square-root form (the default) and its block-Cholesky factor form (same draws to rounding). {memory}.
        Load average {rng(loads, 1)}: compare within a row. Plot:
        `results/tree_scaling.png`. {code_note(d['rows'])}"""),
             para(f"""Target for the default: within {TARGETS['tree_ratio']:g}× mean field up to
        {d['rows'][-1]['gp_nodes']} GP
        nodes, log-log slope ≤ {TARGETS['tree_slope']:g}: {yes(met)} (worst ratio
        {sq['max_sparse_over_mean_field']:.2f},
        slope {sq['sparse_loglog_slope']:.2f}; factor form {fa['max_sparse_over_mean_field']:.2f} and
        {fa['sparse_loglog_slope']:.2f}). The conditional sampler's cost per node grows with its elimination-tree path:
        every draw reads and every update rewrites the ancestors' blocks per case, and siblings, correlated through
        their
        ancestors, cannot be drawn in one batched step without changing the draws; memory traffic, not flops, is the
        cost
        on deep trees. The joint sampler stays within {jo['max_sparse_over_mean_field']:.2f}× mean field (slope
        {jo['sparse_loglog_slope']:.2f}) but is noisier: {joint_note}""")]
    return Section("How does the ELBO's cost scale on large trees?", "`python benchmarks/tree_scaling.py`", tab,
                   notes, ["tree_scaling.json"])


def code_note(rows):
    """'Measured at commit ...' from the rows' ``code`` (``common.code_state``), naming the library files that differed
    from the commit (other people's uncommitted edits in a shared working tree); empty for rows without it."""
    states = {(r["code"]["commit"][:7], str(r["code"]["modified"])) for r in rows if "code" in r}
    if not states:
        return ""
    parts = []
    for commit, modified in sorted(states):
        mod = ast.literal_eval(modified) if modified.startswith("[") else modified
        edits = (" with uncommitted edits to " + ", ".join(f"`{m}`" for m in mod) if isinstance(mod, list) and mod
                 else "" if isinstance(mod, list) else f" ({mod})")
        parts.append(f"{commit}{edits}")
    return "Measured at commit " + "; ".join(parts) + "."


def _linear_fit(xs, ys):
    """Least-squares ``(intercept, slope)`` of ``ys`` on ``xs``."""
    mx, my = mean(xs), mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def sampler_rule(rows):
    """What the sampler-work measurements say about a per-model choice of DAGELBO's sampler on the binary trees: the
    mean variance ratio joint / conditional, the CPU ratio conditional / joint as a linear function of the depth, the
    depth where that line reaches the variance ratio (where the joint sampler's work would drop below the
    conditional's) and the work ratio the two give at depth 9 (1022 GP nodes)."""
    trees = [r for r in rows if r["kind"] == "tree"]
    var = mean([r["var_joint"] / r["var_conditional"] for r in trees])
    a, b = _linear_fit([r["size"] for r in trees], [r["cpu_s_conditional"] / r["cpu_s_joint"] for r in trees])
    return {"var_ratio": var, "cpu_intercept": a, "cpu_slope": b, "crossing_depth": (var - a) / b if b > 0 else None,
            "work_ratio_depth9": var / (a + 9 * b)}


def sec_sampler_work(R):
    d = R("sampler_work.json")
    s = d["settings"]
    rows = []
    for r in d["rows"]:
        cond, joint, mf = r["cpu_s_conditional"], r["cpu_s_joint"], r["cpu_s_mean_field"]
        rows.append([r["problem"], r["gp_nodes"], f"{r['mean_path']:.2f}", r["train_steps"],
                     f"{g(r['var_conditional'])} ({1000 * cond:.0f} ms)", f"{g(r['var_joint'])} ({1000 * joint:.0f} ms)",
                     f"{r['var_joint'] / r['var_conditional']:.1f} ({r['var_ratio_geomean']:.1f})",
                     f"{cond / joint:.2f}", f"**{r['work_ratio']:.2f}**", f"{1000 * mf:.0f} ms",
                     f"{cond / mf:.2f} / {joint / mf:.2f}"])
    tab = table(["problem", "GP nodes", "mean elimination path (blocks)", "trained steps",
                 "conditional: variance (CPU)", "joint: variance (CPU)",
                 "variance joint / cond. (per-coordinate geometric mean)", "CPU cond. / joint",
                 "work joint / cond.", "mean field CPU", "cond. / MF, joint / MF CPU"], rows)
    works = [r["work_ratio"] for r in d["rows"]]
    joint_wins = [f"{r['problem']} ({r['train_steps']} steps)" for r in d["rows"] if r["work_ratio"] < 1]
    verdict = ("lower for the conditional sampler on every problem, so the default stays `sampler=\"conditional\"` "
               "(no `\"auto\"`: a per-model choice would pick it on every model measured)" if not joint_wins else
               "lower for the joint sampler on " + ", ".join(joint_wins) + ": a per-model choice would differ there")
    rule = sampler_rule(d["rows"])
    trees = [r for r in d["rows"] if r["kind"] == "tree"]
    loads = [r["load"] for r in d["rows"]]
    counts = sorted({r["draws_conditional"] for r in d["rows"]}, reverse=True)
    draws = str(counts[0]) + "".join(f" ({', '.join(r['problem'] for r in d['rows'] if r['draws_conditional'] == n)}: "
                                     f"{n})" for n in counts[1:])
    notes = [para(f"""A chordal guide (sparse backend) trained for {s['train_steps']} steps with the conditional sampler
        (the collider: 0 and 500), then {draws} gradient draws of the ELBO per sampler, {s['num_particles']}
        samples each, the samplers interleaved in blocks of {s['block']}; total gradient variance over the guide's
        parameters, in brackets the CPU seconds per ELBO + gradient (median of the blocks). *Work* = variance × CPU
        seconds: joint / conditional above 1 means the conditional sampler reaches a given gradient precision sooner.
        Mean field: a mean-field guide of the same model (untrained), timed in the same blocks. Trees and chains:
        `tree_scaling.py`'s data, learned Gaussian noise from 0.1 and unit kernels (the pre-rule defaults, as in
        the gradient-variance section; with the noise rule the pilot GP fits the deep leaves almost exactly and the
        100-step ELBO is still about -4e8). Load average {rng(loads, 1)} on 2 cores: compare within a row.
        {code_note(d['rows'])}"""),
             para(f"""The rule (DAGELBO's default sampler for structured guides): the sampler with the lower work.
        Measured: joint / conditional work {rng(works, 2)}, {verdict}.
        On the trees the joint sampler's total variance is {rng([r['var_joint'] / r['var_conditional'] for r in
        trees], 1)}× the conditional's at every depth (per coordinate {rng([r['var_ratio_geomean'] for r in trees],
        0)}×, growing with depth), while its CPU advantage grows by {rule['cpu_slope']:.2f} per level
        ({rng([r['cpu_s_conditional'] / r['cpu_s_joint'] for r in trees], 2)}× at depths
        {trees[0]['size']}-{trees[-1]['size']}); on that line the two samplers' work would be equal at depth
        {rule['crossing_depth']:.0f}, and at depth 9 (1022 GP nodes) the joint sampler would still need
        {rule['work_ratio_depth9']:.1f}× the conditional's work. Target (the default chosen per model by its
        variance-adjusted cost, the rule documented): {yes(not joint_wins)}, the default is the sampler of lower
        work on {'every problem' if not joint_wins else 'the other problems'} measured; its cost is {rng([r['cpu_s_conditional'] / r['cpu_s_mean_field'] for r in trees], 2)}×
        mean field's here (the other form of the target, within {TARGETS['tree_ratio']:g}× mean field up to 1022
        nodes, is missed: tree-scaling section). `DAGELBO(sampler="joint")` stays for users who want the cheaper
        gradient (e.g. a fixed budget of steps rather than of CPU time).""")]
    return Section("Which DAGELBO sampler reaches a given gradient precision with less CPU time?",
                   "`python benchmarks/sampler_work.py`", tab, notes, ["sampler_work.json"])


COLLIDER_LABELS = {
    "mean_field": "DAG-VI, Adam (the paper's protocol)", "chordal-dense-cold": "DAG-SVI, Adam",
    "chordal-dense-warm": "DAG-SVI, Adam, mean-field warm start", "chordal-sparse-warm":
    "DAG-SVI (sparse backend), Adam, warm start", "mean_field-antithetic": "DAG-VI, Adam, antithetic pairs",
    "chordal-dense-cold-antithetic": "DAG-SVI, Adam, antithetic pairs", "mean_field-sinkng":
    "DAG-VI, Adam + sink natural gradient", "chordal-dense-cold-sinkng": "DAG-SVI, Adam + sink natural gradient",
    "mean_field-ng": "DAG-VI, Adam then natural gradient", "chordal-dense-cold-ng":
    "DAG-SVI, Adam then natural gradient (the recipe)", "chordal-sparse-cold-ng":
    "DAG-SVI (sparse backend), the recipe"}


def sec_collider(R):
    d = R("collider.json")
    rows = []
    for cfg, s in d["summary"].items():
        def c(k, dd=4):
            return f"{s[k][0]:.{dd}f} ± {s[k][1]:.{dd}f}"
        rows.append([f"{COLLIDER_LABELS.get(cfg, cfg)} (`{cfg}`)", s["n"], c("rmse_train"), c("rmse_test"),
                     c("crps_test"), calib_cell(s, crps=None, nlpd=("nlpd_test",)),
                     c("mean_abs_corr", 3), c("parent_var", 4), c("final_elbo", 1),
                     f"{1000 * s['seconds_per_step_main'][0]:.1f}"])
    by = {}
    for r in d["runs"]:
        by.setdefault(r["config"], {})[r["seed"]] = r

    def paired(a, b, key):
        seeds = sorted(set(by[a]) & set(by[b]))
        diffs = [by[a][k][key] - by[b][k][key] for k in seeds]
        wins = sum(x <= 0 for x in diffs)
        return f"{mean(diffs):+.4f} ± {se(diffs):.4f} ({wins}/{len(seeds)} seeds)"
    ng, mf = d["summary"]["chordal-dense-cold-ng"], d["summary"]["mean_field"]
    adam = d["summary"]["chordal-dense-cold"]
    stalled = min(r["final_elbo"] for r in d["runs"] if r["config"] == "chordal-dense-cold-sinkng")
    P = PUBLISHED["collider"]
    tab = table(["configuration", "seeds", "RMSE observed", "RMSE held out", "CRPS held out",
                 "held out PICP95 / NLPD", "mean abs corr(w1, w2)",
                 "parent variance", "final ELBO", "ms / step"], rows)
    notes = [para(f"""The latent collider `x1 → w1 → w3 ← w2 ← x2` of the DAG-DGP paper (Sec. 4.1), only `w3` observed;
        {d['settings']['steps']} steps per run, float64, one thread; mean ± sd over seeds; RMSE and CRPS of the
        child against the noise-free surface; |corr| and variance of the parents averaged over the cases. *Adam* is the
        paper's protocol; the recipe is `pyro-dag fit collider`'s (Adam, then `GaussianNaturalGradient`). The paper
        reports RMSE {P['rmse'][0]} (DAG-VI) vs {P['rmse'][1]} (DAG-SVI), CRPS {P['crps'][0]:.3f} vs {P['crps'][1]:.3f},
        mean |corr| {P['abs_corr'][0]} vs {P['abs_corr'][1]}, parent variance about {P['parent_var'][0]} vs
        {P['parent_var'][1]} (its grid, split and CRPS estimator are not stated)."""),
             para(f"""Held-out RMSE, the recipe minus DAG-VI paired by seed:
        {paired('chordal-dense-cold-ng', 'mean_field-ng',
        'rmse_test')} under the same schedule, {paired('chordal-dense-cold-ng', 'mean_field', 'rmse_test')} against the
        paper's protocol (in brackets: seeds where DAG-SVI is at least as good). Natural gradients make the
        explaining-away direction, which Adam shrinks, as easy as the others: final ELBO {ng['final_elbo'][0]:.0f} (Adam
        {adam['final_elbo'][0]:.0f}), parent variance {ng['parent_var'][0]:.3f} (Adam {adam['parent_var'][0]:.3f}, mean
        field {mf['parent_var'][0]:.1e}), near the prior variance of the parents' common shift, which the likelihood
        cannot see. The sink steps did not pay (one seed stalled at ELBO {stalled:.0f}); the warm start hurt the
        held-out
        RMSE. ms / step were measured under varying load; the sparse backend is slower here by design (`H` is one
        clique, where `backend="auto"` picks dense).""")]
    return Section("Does the structured guide (DAG-SVI) beat mean field on the latent collider?",
                   "`python benchmarks/collider.py`", tab, notes, ["collider.json"])


def sec_collider_timing(R):
    d = R("collider_timing.json")
    rows = [[r["structure"], "yes" if r["antithetic"] else "no", f"{r['adam_ms']:.2f}", f"{r['natural_ms']:.2f}",
             f"{r['s_3000_adam']:.1f}", f"{r['s_1000_adam_2000_natural']:.1f}"] for r in d["rows"]]
    chordal = [r for r in d["rows"] if r["structure"] == "chordal"]
    svi = min(r["s_3000_adam"] for r in chordal)
    whole = d["whole_run_train_seconds"]
    ab = d["ab_cpu_seconds"]
    tab = table(["guide", "antithetic", "Adam ms / step", "natural-gradient ms / step", "3000 Adam steps (s)",
                 "1000 Adam + 2000 natural (s)"], rows)
    notes = [para(f"""Steady-state ms per step inside `model.fixed_kernels()`, {d['settings']['steps']} steps timed
        and scaled
        to a run; one thread; load average {d['load_before']:.1f} before, {d['load_after']:.1f} after. Targets: 3000
        DAG-SVI steps in ≤ {TARGETS['collider_svi_3000_s']:g} s: {yes(svi <= TARGETS['collider_svi_3000_s'])}
        ({svi:.1f} s);
        `pyro-dag fit collider`'s recipe in ≤ {TARGETS['collider_recipe_s']:g} s:
        {yes(max(whole) <= TARGETS['collider_recipe_s'])} (whole runs, training only:
        {', '.join(f'{x:.1f}' for x in whole)}
        s). A step is thousands of small tensor operations, so its time is per-operation overhead more than arithmetic:
        the previous and current code paths took {ab['previous']:.2f} and {ab['current']:.2f} CPU s side by side (same
        final ELBO).""")]
    return Section("How long does a collider fit take? (collider timing)", "`python benchmarks/collider_timing.py`",
                   tab, notes, ["collider_timing.json"])


def sec_sampler_rule_trees(R):
    if not os.path.exists(os.path.join(R.folder, "sampler_rule_trees.json")):
        return None
    d = R("sampler_rule_trees.json")
    rows = []
    for r in d["rows"]:
        mf = r["mean_field_cpu_s"]
        cond = (f"{r['conditional_cpu_s']:.2f} ({r['conditional_cpu_s'] / mf:.2f})" if "conditional_cpu_s" in r
                else f"not run: state {r['conditional_state_mib'] / 1024:.1f} GiB")
        rows.append([r["depth"], r["gp_nodes"], r["samples"], f"{r['conditional_state_mib']:.0f}", r["picked"],
                     f"{mf:.2f}", cond, f"{r['joint_cpu_s']:.2f} ({r['joint_cpu_s'] / mf:.2f})",
                     f"**{r['picked_over_mean_field']:.2f}**"])
    tab = table(["depth", "GP nodes", "samples S", "conditional state (MiB)", "train picks", "mean field CPU s",
                 "conditional CPU s (/ MF)", "joint CPU s (/ MF)", "picked / MF"], rows)
    big = [r for r in d["rows"] if r["gp_nodes"] >= 1022]
    verdict = "; ".join(f"S = {r['samples']}: {r['picked']} at {r['picked_over_mean_field']:.2f}x "
                        f"({yes(r['picked_over_mean_field'] <= 2.0)})" for r in big) or "not run at depth 9"
    budget = d["rows"][0]["budget_mib"]
    loads = [r["load"][0] for r in d["rows"]]
    switch = []
    for S in sorted({r["samples"] for r in d["rows"]}):
        joint = [r for r in d["rows"] if r["samples"] == S and r["picked"] == "joint"]
        switch.append(f"S = {S}: the joint sampler from depth {min(r['depth'] for r in joint)}" if joint else
                      f"S = {S}: the conditional sampler at every depth measured")
    switch = "Picked: " + "; ".join(switch) + "."
    notes = [para(f"""What `train` runs on `tree_scaling.py`'s binary trees (20 cases, 20 inducing points per node,
        the DAGDGP defaults, a chordal guide on the sparse backend): `DAGELBO(num_particles=S)`, whose sampler the
        size rule (`pyro_dag.infer.training.sampler_rule.choose_sampler`) switches from the conditional sampler to
        the joint one when the conditional sampler's square-root state, S x cases x the sum over nodes of the
        squared block sizes on each node's elimination-tree path, exceeds {budget:.0f} MiB per step. CPU seconds of
        one ELBO + gradient, median of {d['settings']['repeats']} interleaved rounds after a warm-up, one thread;
        the conditional sampler is timed only where the rule would run it. Issue 43's target (the default sampler
        within 2x mean field on 1022-node trees, or the rule that picks it documented and measured):
        {verdict}. {switch} Where the conditional sampler's state fits, it stays: its variance-adjusted work is
        the lower one on every tree measured (sampler-work section). Load average
        {rng(loads, 1)}, 2 cores. {code_note(d['rows'])}""")]
    return Section("Which sampler does train pick on large trees, and what does it cost?",
                   "`python benchmarks/sampler_rule_trees.py` (under the shared lock)", tab, notes,
                   ["sampler_rule_trees.json"])


def sec_setup_scaling(R):
    d = R("setup_scaling.json")

    def cell(r, key):
        v = r.get("cpu_s")
        return "—" if v is None else f"{v:.1f}"

    def error(r):   # a run that printed only the tree it imported died without a result (killed: out of memory)
        e = r.get("error", "")
        return "died without a result" if e.startswith("TREE ") else e[:40]

    rows = []
    for r in d["rows"]:
        cur, prev = r["current"], r.get("previous") or {}
        st = cur.get("stages", {})
        ratio = (f"{cur['cpu_s'] / prev['cpu_s']:.1f}" if "cpu_s" in cur and "cpu_s" in prev else "—")
        hid = {0.0: "none", 1.0: "all but the leaf"}.get(r["hidden"], f"{r['hidden']:.0%}")
        rows.append([r["graph"], str(cur.get("nodes", r["nodes"])), hid, r["precision"],
                     error(cur) if "error" in cur else cell(cur, "cpu_s"),
                     error(prev) if "error" in prev else cell(prev, "cpu_s"), ratio,
                     " / ".join(f"{st.get(k, 0.0):.1f}" for k in ("noise_rule", "exact_fits", "hidden_start")),
                     f"{cur['peak_rss_mib']:.0f}" if "peak_rss_mib" in cur else "—"])
    tab = table(["graph", "nodes", "hidden", "guide", "CPU s (now)", f"CPU s ({d['previous_commit'][:7]})", "ratio",
                 "pilots / exact fits / hidden start (CPU s)", "peak MiB (now)"], rows)
    target = [r for r in d["rows"] if r["graph"] == "er" and r["nodes"] == 200 and r["hidden"] == 0.0]
    big = [r for r in d["rows"] if r["nodes"] >= 500]
    verdicts = []
    for r in target:
        cur, prev = r["current"], r.get("previous") or {}
        if "cpu_s" in cur and "cpu_s" in prev:
            q = cur["cpu_s"] / prev["cpu_s"]
            verdicts.append(f"{r['precision']}: {q:.1f}x ({yes(q <= 3.0)})")
    for r in big:
        cur = r["current"]
        if "cpu_s" in cur:
            verdicts.append(f"{r['nodes']}-node DAG {cur['cpu_s']:.0f} CPU s and {cur['peak_rss_mib']:.0f} MiB "
                            f"({yes(cur['cpu_s'] < 60 and cur['peak_rss_mib'] < 2048)})")
    notes = [para(f"""`DAGDGP(graph)` + `AutoStructuredGuide(model, precision=...)` + `train(..., num_steps=3)` with
        every default (noise rule, pilot kernels, exact fits of the nodes with observed inputs, hidden-node start),
        CPU seconds from the model's construction to the end of the third step, each run a fresh process, one thread,
        the current tree and the release before the data-driven defaults ({d['previous_commit']}) side by side; GP SEM
        data (RBF random features, noise scale 0.3), n = {d['n']} cases, roots as inputs. Issue 43's targets: a
        200-node random DAG within 3x the previous release (mean field and chordal), a 500-node DAG through set-up in
        under 60 CPU s and 2 GiB: {'; '.join(verdicts) or 'not run'}. Load average {', '.join(f'{x:.1f}' for x in d['load'])}
        at the end of the run, 2 cores. {code_note([d])}""")]
    return Section("How does the defaults' set-up grow with the graph? (set-up scaling)",
                   "`python benchmarks/setup_scaling.py` (under the shared lock: `flock /tmp/pyro_dag_bench.lock ...`)", tab, notes,
                   ["setup_scaling.json"])


def sec_rows_scaling(R):
    if not os.path.exists(os.path.join(R.folder, "rows_scaling.json")):
        return None
    d = R("rows_scaling.json")
    ok = [r for r in d["rows"] if "error" not in r]
    groups = {}
    for r in ok:
        # the observed and the hidden chain are the same data (rows_scaling.make_problem): one exact GP of y on x
        case = "chain" if r["case"] in ("xhy", "hidden") and r["method"].startswith("exact") else r["case"]
        groups.setdefault((case, r["method"], r["n"]), []).append(r)
    order = {"xy": 0, "chain": 1, "xhy": 2, "hidden": 3}
    names = {"default": "default path", "exact_gp_subset": "ExactGP (subset)", "exact_gp_all": "exact GP, all rows",
             "cli": "pyro-dag fit --csv (its 80/20 split)"}
    cases = {"xy": "x -> y", "chain": "x -> h -> y (y on x)", "xhy": "x -> h -> y, h observed",
             "hidden": "x -> h -> y, h hidden"}
    rows = []
    for (case, method, n), rs in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][2], kv[0][1])):
        cpu = [r["fit_cpu_s"] for r in rs]
        rows.append([cases[case], names[method], f"{n:,}", str(len(rs)), f"{mean(cpu):.1f} (max {max(cpu):.1f})",
                     f"{mean(cpu) / (n / 1e4):.1f}",
                     f"{mean([r['predict_cpu_s'] for r in rs]):.1f}" if method == "default" else "–",
                     mse([r["rmse"] for r in rs]), mse([r["rmse_f"] for r in rs], 4), mse([r["crps"] for r in rs]),
                     mse([r["nlpd"] for r in rs]), mse([r["picp"] for r in rs]),
                     f"{max(r['peak_rss_mib'] for r in rs):.0f}" if all("peak_rss_mib" in r for r in rs)
                     else "n.r."])
    tab = table(["graph", "method", "rows", "seeds", "fit CPU s (mean, max)", "fit CPU s per 10⁴ rows",
                 "predict CPU s", "RMSE", "RMSE vs E[y given x]", "CRPS", "NLPD", "PICP95", "peak MiB"], rows)
    exact = {}
    for r in ok:
        if r["method"] == "exact_gp_all":
            for case in (("xhy", "hidden") if r["case"] in ("xhy", "hidden") else (r["case"],)):
                exact[(case, r["seed"])] = r
    verdicts = []
    for case in ("xy", "xhy", "hidden"):
        big = [r for r in ok if r["case"] == case and r["method"] == "default" and r["n"] == 200000]
        paired = [(r, exact[(case, r["seed"])]) for r in big if (case, r["seed"]) in exact]
        if not big:
            continue
        worst_cpu = max(r["fit_cpu_s"] + r["predict_cpu_s"] for r in big)
        text = (f"{cases[case]}: fit and predict CPU at most {worst_cpu:.0f} s over {len(big)} seeds "
                f"({yes(worst_cpu < 600)})")
        if paired:
            ratio = max(a["rmse"] / b["rmse"] for a, b in paired)
            ratio_f = [a["rmse_f"] / b["rmse_f"] for a, b in paired]
            text += (f", RMSE at most {ratio:.3f}x the exact GP's on 2·10⁴ rows over {len(paired)} seeds "
                     f"({yes(ratio <= 1.2)}; against E[y | x], {min(ratio_f):.2f}-{max(ratio_f):.2f}x)")
        verdicts.append(text)
    messages = sorted({m for r in ok for m in r.get("messages", [])})
    steps = sorted({r["steps"] for r in ok if r["method"] == "default" and r["case"] == "hidden"})
    notes = [para(f"""`DAGDGP(graph, seed=seed)`, `AutoStructuredGuide(model)` and `train(model, guide, inputs, data,
        num_steps={', '.join(map(str, steps)) or 1000})` with every other default, then `model.predict` of
        {d['n_test']} held-out rows from `x` (the leaf `y` scored: RMSE against the noisy `y` and against `E[y | x]`,
        CRPS, NLPD and PICP95 with the learned noise); each run a fresh process, one thread, CPU seconds. Data: random
        RBF-feature functions with random length-scales and noise (`benchmarks/rows_scaling.py`, chosen before any
        default was tuned on them); the 2·10⁴-row problem is the first rows of the 2·10⁵-row one, same held-out rows;
        the observed and the hidden chain are the same data (`h` given or not), so one exact GP of `y` on `x` serves
        both. Peers on x: `ExactGP` (type-II ML on a random subset) and the exact GP on all 2·10⁴ rows with that fit's
        hyperparameters (one in-place Cholesky). The observed chains have every node fitted exactly
        (`fit_collapsed`: hyperparameters on a random 4096 rows above that, q(V) from every row), and an observed
        chain predicts `y` from `x` by sampling `h`; the hidden chain starts at the shallow fit and trains with
        minibatches of 2048 rows above 8192. Issue 43's target, 2·10⁵ rows under 10 CPU minutes at an RMSE within
        1.2x the 2·10⁴-row exact GP's: {'; '.join(verdicts) or 'not run'}.""")]
    notes.append(para(f"""Load average {', '.join(f'{x:.1f}' for x in d['load'])} at the end, 2 cores, shared.
        {code_note([d])}"""))
    notes.append(para("The defaults' one-line messages in these runs: " + ("; ".join(f"\"{m}\"" for m in messages)
                                                                              or "none") + "."))
    return Section("How does the default path scale in rows? (rows scaling)",
                   "`python benchmarks/rows_scaling.py --cases xy xhy hidden --seeds 0-4` (under the shared lock: "
                   "`flock /tmp/pyro_dag_bench.lock ...`; `--resume` continues a run in chunks)", tab, notes,
                   ["rows_scaling.json"])


def sec_rows_scaling_cli(R):
    have = os.path.exists(os.path.join(R.folder, "rows_scaling_cli.json"))
    if not have and not os.path.exists(os.path.join(R.folder, "rows_scaling_draws.json")):
        return None
    d = R("rows_scaling_cli.json") if have else {"rows": [], "load": []}
    cases = {"xy": "x -> y", "xhy": "x -> h -> y, h observed"}
    rows, verdicts = [], []
    for r in sorted(d["rows"], key=lambda r: (r["case"], r["n"], r["seed"])):
        if "error" in r:
            rows.append([cases[r["case"]], f"{r['n']:,}", r["seed"], f"{r['fit_cpu_s']:.0f}" if "fit_cpu_s" in r
                         else "–", r["error"][:80]] + ["–"] * 7)
            continue
        ph, base = r.get("phases_cpu_s", {}), r.get("baselines", {})
        best = base.get("exact_gp_on_inputs")
        rows.append([cases[r["case"]], f"{r['n']:,}", r["seed"], f"{r['fit_cpu_s']:.0f}",
                     " / ".join(f"{ph.get(k, 0):.0f}" for k in ("train", "predict", "baselines", "files")),
                     f(r["rmse"]), f(best), f(r["rmse"] / best) if best else "–", f(r["crps"]), f(r["nlpd"]),
                     f(r["picp"]), f"{r['peak_rss_mib']:.0f}"])
        if best:
            verdicts.append(f"{cases[r['case']]} at {r['n']:,} rows: {r['fit_cpu_s']:.0f} CPU s "
                            f"({yes(r['fit_cpu_s'] < 600)} against 10 CPU minutes), RMSE {r['rmse'] / best:.3f}x "
                            f"the exact GP's on the inputs ({yes(r['rmse'] / best <= 1.2)})")
    tab = table(["graph", "rows", "seed", "CPU s, whole command", "of which train / predict / baselines / files",
                 "RMSE of y", "exact GP on x", "ratio", "CRPS", "NLPD", "PICP95", "peak MiB"], rows)
    # the source lines that Python prints under a warning are not output of the command's own
    shown = sorted({p for r in d["rows"] for p in r.get("progress", []) if "self." not in p})
    messages = sorted({m for r in d["rows"] for m in r.get("messages", [])})
    notes = [para(f"""`pyro-dag fit --csv data.csv --graph graph.txt --threads 1 --out DIR` with the command's
        defaults (progress shown) on the rows of the rows-scaling problems (`benchmarks/rows_scaling.py --methods
        cli`: a CSV of `x`, `y` and, for the chain, `h`), run in the benchmark's process so that its phases can be
        timed: CPU seconds of the whole command (reading, set-up, the fit, prediction of every row, the baselines,
        metrics.json, predictions.csv and the figure). It holds out 20 % of the rows and predicts `y` from `x`
        (propagation; `h`'s measured values are not used at test time), so its RMSE is compared with the exact GP
        on the inputs that it reports itself (`ExactGP` of `y` on `x`, type-II ML on 2000 rows, same rows):
        {'; '.join(verdicts) or 'no finished run'}. Load average {', '.join(f'{x:.1f}' for x in d['load']) or
        'n.r.'} at the end, 2 cores, shared. {code_note([d])}"""),
             para("What it printed besides the report and its warnings: " + ("; ".join(f"\"{m}\"" for m in shown) or "nothing")
                  + ". Its one-line messages: " + ("; ".join(f"\"{m}\"" for m in messages) or "none") + ".")]
    sources = ["rows_scaling_cli.json"] if have else []
    if os.path.exists(os.path.join(R.folder, "rows_scaling_draws.json")):
        dd = R("rows_scaling_draws.json")
        sources.append("rows_scaling_draws.json")
        by = {}
        for r in dd["rows"]:
            by.setdefault(r["draws"], []).append(r)
        cells = [f"{k} draws: RMSE {rng([r['rmse'] for r in v])}, NLPD {rng([r['nlpd'] for r in v], 2)}, "
                 f"PICP95 {rng([r['picp'] for r in v])}" for k, v in sorted(by.items())]
        notes.append(para(f"""Why the command does not simply take fewer draws on many rows: an observed chain's leaf
            is predicted from `x` by sampling `h`, so its predictive is a mixture over the draws, and each draw
            of `y` at a sampled `h` needs its own predictive variance (`M` = 512 inducing points where the inputs
            are measured): `O(M²)` per row and draw by a triangular solve, `O(M r)` through the factor of `I - S`
            that `predict` computes once per node (`pyro_dag.infer.factored_prediction`, `r` the eigenvalues kept,
            10 and 15 of 512 for `h` and `y` on the observed chain at 2·10⁴ rows, data seed 0). On the observed
            chain at 2·10⁴ rows (data seed 0, 2000 held-out rows, two prediction seeds; `benchmarks/rows_scaling_draws.py`, quality only): {'; '.join(cells)}. Twenty
            draws make the intervals too narrow; 100 are needed, so the cost of predicting an observed chain is
            that of 100-200 draws per row. {code_note([dd])}"""))
    return Section("Does `pyro-dag fit --csv` scale in rows? (rows scaling, command line)",
                   "`python benchmarks/rows_scaling.py --cases xy xhy --sizes 200000 --seeds 0 --methods cli` "
                   "(under the shared lock)", tab, notes, sources)


def sec_collider_recipe_ab(R):
    d = R("collider_recipe_ab.json")
    med, ops, ratio = d["median"], d["ops_per_step"], d["ratio_new_over_baseline"]
    commits = {"baseline": d["baseline_commit"][:7], "new": d["new_commit"][:7]}
    rows = [[f"{side} ({commits[side]})", f"{med[side]['train_seconds']:.1f}", f"{med[side]['fit_cpu_seconds']:.1f}",
             f"{med[side]['first_step_s']:.2f}", f"{med[side]['adam_ms']:.2f}", f"{med[side]['ng_ms']:.2f}",
             f"{ops[side]['adam']} / {ops[side]['natural_gradient']}", f"{d['final_elbo'][side]:.9f}"]
            for side in ("baseline", "new")]
    rows.append(["new / baseline", f"{ratio['train_seconds']:.2f}", f"{ratio['fit_cpu_seconds']:.2f}",
                 f"{ratio['first_step_s']:.3f}", f"{ratio['adam_ms']:.2f}", f"{ratio['ng_ms']:.2f}",
                 f"{ops['new']['adam'] / ops['baseline']['adam']:.2f} / "
                 f"{ops['new']['natural_gradient'] / ops['baseline']['natural_gradient']:.2f}",
                 f"{d['final_elbo_rel_diff']:.1e} (relative)"])
    tab = table(["code", "training s", "CPU s of the fit", "first step s", "Adam ms / step",
                 "natural-gradient ms / step", "tensor ops per step (Adam / natural gradient)", "final ELBO"], rows)
    target = TARGETS["collider_recipe_ab"]
    earlier = [h["ratio_new_over_baseline"]["train_seconds"] for h in d["history"]]
    spread = (f" Earlier runs of the script on the same library code: {', '.join(f'{x:.2f}' for x in earlier)}."
              if earlier else "")
    notes = [para(f"""What `pyro-dag fit collider` trains (`fit_collider`: {d['settings']['steps']} steps, chordal guide,
        antithetic pairs, {d['settings']['after']} Adam then natural-gradient steps, one thread), run by the commit
        before the speed-ups of issue 36 ({commits['baseline']}, a git worktree) and by the working tree
        ({commits['new']}), each in a fresh process, {d['settings']['repeats']} repeats alternating (the order swapped
        every repeat), medians. Training seconds are the loop's, as the CLI prints them; ms per step are medians
        over each phase's steps; tensor ops are those dispatched in one step of each phase (forward, backward and
        update). Target (issue 36): new / baseline training time ≤ {target:g}: {yes(ratio['train_seconds'] <= target)}
        ({ratio['train_seconds']:.2f}).{spread} Load average {d['load_before'][0]:.1f} before and
        {d['load_after'][0]:.1f} after, on 2 cores: every time here is inflated well above the collider-timing
        rows, and the ratio moves by a tenth between runs."""),
             para(f"""Where the time went: the baseline's first step imported `torch._dynamo` (through
        `torch.optim.Adam`'s constructor: the first-step column); a step is hundreds of small tensor operations
        ({ops['new']['adam']} per Adam step, {ops['baseline']['adam']} before), so its time is per-operation dispatch,
        allocation and autograd bookkeeping more than arithmetic (the child's `[660, 49] x [49, 49]` products and
        `[4, 165, 49]` elementwise passes are a minority of it). Removed: the full-batch plate's case indexing (which made the root-parent conditionals miss their
        cache), the argument checks after the first step, torch.optim's per-step machinery (the same foreach Adam,
        bit for bit), the batched triangular solves of one-output nodes (forward substitution), a triangular-solve
        backward, the distribution objects of the Gaussian likelihood, and the natural-gradient steps' parameter
        reads, writes and Cholesky of L Lᵀ. The final ELBO and metrics agree with the baseline's to rounding
        (`tests/infer/test_collider_recipe_speed.py` checks a short run against the baseline's numbers).""")]
    return Section("Is the collider recipe faster than before issue 36? (A/B against the old code)",
                   "`python benchmarks/collider_recipe_ab.py`", tab, notes, ["collider_recipe_ab.json"])


def sec_quickstart(R):
    d = R("quickstart.json")
    T = TARGETS["quickstart"]
    rows = [[r["seed"], f"{r['rmse_observed']:.4f}", f"{r['rmse_held_out']:.4f}", calib_cell(r), f"{r['var_w1']:.3f}",
             f"{r['var_w2']:.3f}", f"{r['final_elbo']:.1f}", f"{r['seconds']:.0f}"] for r in d["rows"]]
    rs = d["rows"]
    worst = (max(r["rmse_observed"] for r in rs), max(r["rmse_held_out"] for r in rs),
             min(min(r["var_w1"], r["var_w2"]) for r in rs), max(max(r["var_w1"], r["var_w2"]) for r in rs),
             min(r["final_elbo"] for r in rs))
    holds = (worst[0] < T["rmse_observed"] and worst[1] < T["rmse_held_out"] and T["var"][0] < worst[2]
             and worst[3] < T["var"][1] and worst[4] > T["final_elbo"])
    tab = table(["optimisation seed", "child RMSE, observed", "child RMSE, held out", f"held out {CALIB_HEAD}",
                 "parent variance w1",
                 "parent variance w2", "final ELBO", "seconds"], rows)
    notes = [para(f"""`examples/quickstart.py` (the README's Quickstart) unchanged but for its `seed = 0` line (the
        data set
        stays `collider(seed=0)`), one process per seed; seconds of the whole script on a loaded shared machine. Worst
        over the {len(rs)} seeds: observed RMSE {worst[0]:.4f}, held-out {worst[1]:.4f}, parent variance
        {worst[2]:.3f}-{worst[3]:.3f}, final ELBO {worst[4]:.1f}: the README's claim (RMSE below {T['rmse_observed']}
        and
        {T['rmse_held_out']}, variance between {T['var'][0]} and {T['var'][1]}, ELBO above {T['final_elbo']}) holds on
        every seed: {'yes' if holds else '**no**'}.""")]
    return Section("Does the README Quickstart hold on every optimisation seed?", "`python benchmarks/quickstart.py`",
                   tab, notes, ["quickstart.json"])


def sec_collider_data_seeds(R):
    d = R("collider_data_seeds.json")
    variants = []
    for r in d["rows"]:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    rows = []
    for ds in sorted({r["data_seed"] for r in d["rows"]}):
        row = [ds]
        for v in variants:
            x = [r for r in d["rows"] if r["data_seed"] == ds and r["variant"] == v]
            row.append("–" if not x else f"{x[0]['rmse_observed']:.4f} / {x[0]['rmse_held_out']:.4f} / "
                                          f"{x[0]['var_w1']:.3f} / {x[0]['final_elbo']:.1f}")
        rows.append(row)
    poor = TARGETS["poor_fit_rmse"]
    bad = {v: sorted(r["data_seed"] for r in d["rows"] if r["variant"] == v and r["rmse_observed"] > poor)
           for v in sorted({r["variant"] for r in d["rows"]})}
    oracle = [r for r in d["rows"] if "oracle" in r["variant"]]
    cold = {r["data_seed"]: r for r in d["rows"] if r["variant"] == "recipe"}
    for row, ds in zip(rows, sorted({r["data_seed"] for r in d["rows"]})):
        x = [r for r in d["rows"] if r["data_seed"] == ds and r["variant"] == "recipe"]
        row.append(calib_cell(x[0]) if x else "–")
    tab = table(["data set"] + [f"{v}: RMSE observed / held out / var w1 / ELBO" for v in variants]
                + [f"recipe, held out {CALIB_HEAD}"], rows)
    notes = [para(f"""The Quickstart's recipe on data sets `collider(seed=k)` (one optimisation seed, one thread, load
        average {d['load_average']}), beside `warm_start=500` and, on the worst data set, an *oracle start* from the
        posterior of a model that observes the true parents (a diagnosis, not a method). With observed-case RMSE above
        {poor} counting as poor, the recipe is poor on data sets {bad.get('recipe')} and `warm_start=500` on
        {bad.get('warm_start=500')}: the README therefore fixes the data set."""
                  + "".join(f""" On data set {o['data_seed']} the oracle start ends at ELBO {o['final_elbo']:.1f}
        against
        {cold[o['data_seed']]['final_elbo']:.1f} cold: the recipe holds the good optimum, but the cold Adam phase ends
        in a
        poor basin that the natural-gradient steps do not leave.""" for o in oracle))]
    return Section("Does the Quickstart's recipe hold on other collider data sets?",
                   "`python benchmarks/collider_data_seeds.py`", tab, notes, ["collider_data_seeds.json"])


def sec_chain_gpytorch(R):
    d = R("chain_dgp_vs_gpytorch.json")
    s = d["settings"]
    rows, verdict = [], []
    for r in d["rows"]:
        rows.append([r["n"], r["M"], f"{1000 * r['seconds_per_step_pyro_dag']:.1f}",
                     f"{1000 * r['seconds_per_step_gpytorch']:.1f}", f"{r['ratio_pyro_dag_over_gpytorch']:.2f}",
                     f"{r['test_nlpd_pyro_dag_at_200']:.3f} / {r['test_nlpd_pyro_dag']:.3f}",
                     f"{r['test_nlpd_gpytorch_at_200']:.3f} / {r['test_nlpd_gpytorch']:.3f}",
                     f"{r['test_nlpd_pyro_dag_defaults_at_200']:.3f} / {r['test_nlpd_pyro_dag_defaults']:.3f}",
                     calib_cell(r, picp=("test_picp95_pyro_dag",), crps=("test_crps_pyro_dag",),
                                nlpd=("test_nlpd_pyro_dag",))])
        verdict.append(r["ratio_pyro_dag_over_gpytorch"] <= TARGETS["chain_ratio"]
                       and r["test_nlpd_pyro_dag"] <= r["test_nlpd_gpytorch"])
    loads = [r["load"] for r in d["rows"]]
    tab = table(["n", "M", "pyro_dag ms / step", "GPyTorch ms / step", "ratio",
                 "NLPD like for like (200 / all steps)", "NLPD GPyTorch (200 / all steps)",
                 "NLPD pyro_dag defaults (200 / all steps)", f"like for like {CALIB_HEAD}"], rows)
    notes = [para(f"""A two-layer chain DGP, {s['steps']} steps of {s['optimiser']} at lr {s['lr']} on both sides,
        {s['samples']} samples, {s['dtype']}, one thread; ms per step (median of {s['blocks']} interleaved blocks); test
        NLPD (lower is better). *Like for like*: pyro_dag started where GPyTorch starts (the row timed); *defaults*:
        pyro_dag's own initialisation. Load average {rng(loads, 1)}: compare the ratio. Target (ratio ≤
        {TARGETS['chain_ratio']} and NLPD at or below GPyTorch's): met in {sum(verdict)} of {len(verdict)} rows. The
        like-for-like start learns more slowly early on mostly because pyro_dag whitens with the upper Cholesky factor,
        which its structured guides need; the defaults are kept for the latent collider's sake.""")]
    return Section("Is pyro_dag as fast as GPyTorch on a two-layer deep GP?",
                   "`python benchmarks/chain_dgp_vs_gpytorch.py`", tab, notes, ["chain_dgp_vs_gpytorch.json"])


def sec_gpu(R):
    d = R("gpu.json")
    env = d["environment"]
    rows = [["chain DGP, M = %d" % r["M"], r["n"], r["device"], f"{1000 * r['pyro_dag_s']:.1f}",
             f"{1000 * r['gpytorch_s']:.1f}", f"{r['pyro_dag_s'] / r['gpytorch_s']:.2f}"] for r in d["chain"]]
    rows += [[f"structure fit, ER p = {r['p']}, {r['likelihood']}", "–", r["device"],
              f"{1000 * r['seconds_per_step']:.1f}", "–", "–"] for r in d["structure"]]
    tab = table(["workload", "n", "device", "pyro_dag ms / step", "GPyTorch ms / step", "ratio"], rows)
    notes = [para(f"""{env.get('gpu', 'GPU')}, torch {env['torch']}; CPU rows on the same machine with one thread; the
        chain
        DGP of the previous section, the structure fit in float32. Not run by CI. One run ({env['date'][:10]}): its
        note in
        the JSON lists the device bugs it found (since fixed, not yet re-checked on CUDA), which is why the MLP
        structure
        fit has no CUDA row and the tree benchmark did not run.""")]
    return Section("How much faster is a GPU?", "`python benchmarks/gpu.py --out DIR` on a machine with a GPU", tab,
                   notes, ["gpu.json"])


def sec_distributed(R):
    d = R("distributed.json")
    rows = []
    for r in d["runs"]:
        rows.append([r["processes"], "gloo" if r["distributed"] else "none", r["cases_per_step"],
                     f"{r['median_step_seconds']:.3f}; {r['fastest_step_seconds']:.3f}",
                     f"{r['throughput_cases_per_second']:.0f}",
                     ", ".join(f"{x:.0f}" for x in r["peak_rss_mib_per_process"])])
    two = [r for r in d["runs"] if r["processes"] == 2][0]
    tab = table(["processes", "process group", "cases / step", "s / step (median; fastest run)", "cases / s (median)",
                 "peak RSS per process (MiB)"], rows)
    notes = [para(f"""`x1, x2 → a → b`, n = {d['n']} cases sharded over the processes, {d['batch_per_process']} per
        process
        and step, {d['num_inducing']} inducing points per node, Adam steps of `train(..., distributed=True)`, one
        thread per
        process; median of {d['timed_steps']} steps, {d['repeats']} interleaved runs. Throughput 2 vs 1 gloo processes:
        {d['throughput_ratio_2_vs_1']:.2f}× ({d['throughput_ratio_2_vs_1_fastest_runs']:.2f}× between the fastest
        runs), on
        {d['cores']} cores shared with other jobs (load {d['load_average_before'][0]:.1f}), so it says little about
        dedicated
        cores; the all-reduce of {two['allreduce_elements']} numbers takes
        {1000 * two['allreduce_median_seconds']:.2f} ms of
        a {1000 * two['median_step_seconds']:.0f} ms step.""")]
    return Section("Does data-parallel training pay?", "`python benchmarks/distributed.py`", tab, notes,
                   ["distributed.json"])


def sec_threads(R):
    d = R("threads.json")
    names = {"structure": f"structure.fit, {d['steps']['structure']} steps",
             "collider": f"fit_collider (recommended recipe), {d['steps']['collider']} steps"}
    rows = [[names[r["workload"]], r["condition"], f"{r['seconds']['default']:.1f}", f"{r['seconds']['1']:.1f}",
             f"{r['seconds']['2']:.1f}", f"{r['seconds']['default'] / r['seconds']['1']:.1f}×"] for r in d["results"]]
    loaded = [r["seconds"]["default"] / r["seconds"]["1"] for r in d["results"] if r["condition"] == "loaded"]
    tab = table(["workload", "condition", "torch default threads (s)", "1 thread (s)", "2 threads (s)",
                 "default / 1"], rows)
    notes = [para(f"""Median of {d['repeats']} fresh processes on {d['cpu_count']} cores; *1* and *2* pass `num_threads`
        (`pyro_dag.threads.limit_threads`); *loaded*: a single-threaded busy loop on one core. Idle, the thread count
        does
        not matter; loaded, torch's default is {rng(loaded, 1)}× slower than one thread, which is why the library's
        loops
        and every benchmark use one.""")]
    return Section("How many threads should a fit use?", "`python benchmarks/threads.py`", tab, notes, ["threads.json"])


def sec_generic(R):
    d = R("generic_hierarchical.json")
    s = d["settings"]
    rows = [[r["guide"], f"{r['neg_elbo']:.3f}", f"{r['gap_to_exact']:.3f}", f"{r['ms_per_step']:.1f}"]
            for r in d["rows"]]
    tab = table(["guide", "-ELBO", "gap to exact", "ms / step"], rows)
    notes = [para(f"""A linear-Gaussian hierarchy ({s['groups']} groups × {s['subgroups']} subgroups), {s['steps']}
        `Trace_ELBO` steps per guide with its default initialisation; exact `-log p(y)` =
        {d['exact_neg_log_evidence']:.3f}.
        ms are side by side in one run.""")]
    return Section("How does AutoStructuredGuide do on a plain Pyro model?",
                   "`python benchmarks/generic_hierarchical.py`", tab, notes, ["generic_hierarchical.json"])


def sec_conformance(R):
    d = R("pyro_conformance.json")
    b, a = d["before"], d["after"]

    def pf(x):
        return f"{x.get('passed', 0)} passed, {x.get('failed', 0)} failed"
    rows = [["counted cases", pf(b["final"]), pf(a["final"])]]
    for name in sorted(a["vs_cmp"]):
        rows.append([f"{name}, counted", pf(b["vs_cmp"][name]), pf(a["vs_cmp"][name])])
    tab = table(["", "before", "after"], rows)
    notes = [para(f"""Pyro's `test_autoguide.py`, `autoguide/test_gaussian.py` and `autoguide/test_inference.py`
        (unmodified; a warning fails a test) with `AutoStructuredGuide` added to every guide parametrisation; a case
        counts when `AutoMultivariateNormal` or `AutoGaussian` passes it; *before*: before `AutoStructuredGuide`
        became a
        Pyro autoguide; {d['seconds']:.0f} s. Uncounted failures: """
                  + "; ".join(f"`{k}` ({v})" for k, v in sorted(d["not_applicable"].items())) + ".")]
    return Section("Does AutoStructuredGuide pass Pyro's own autoguide tests?",
                   "`python benchmarks/pyro_conformance.py` (needs the harness; says so and exits 0 without it)", tab,
                   notes, ["pyro_conformance.json"])


# ----------------------------------------------------------------------------------------------------------------
# Sections: MCMC, calibration, prior collapse
# ----------------------------------------------------------------------------------------------------------------
def _m(d):
    M = d["num_inducing"]
    return ",".join(f"{k}={v}" for k, v in sorted(M.items())) if isinstance(M, dict) else str(M)


def _nuts_row(name, d, common_m):
    model = d["model"]
    observed = d.get("observe_hidden", False)
    obs = ("a, b" if observed else "b") if model == "chain" else ("w1, w2, w3" if observed else "w3")
    sampler = "CompiledNUTS" if d.get("compile") else "TracedNUTS" if d.get("jit") else "NUTS"
    cfg = [] if _m(d) == common_m[model] else [f"M {_m(d)}"]
    if d.get("collapse") == "inducing":
        cfg.append("collapsed")
    if d.get("full_mass"):
        cfg.append("dense mass")
    elif d.get("dense_block"):
        cfg.append("dense block")
    if d.get("hidden_kernel") not in (None, "rbf"):
        cfg.append({"matern32": "Matérn-3/2", "matern52": "Matérn-5/2"}.get(d["hidden_kernel"], d["hidden_kernel"])
                   + " hidden kernel")
    if d.get("fix_latent_variance"):
        cfg.append("hidden variance fixed")
    if d.get("fix_child_lengthscale"):
        parts = [p.split("=") for p in d["fix_child_lengthscale"].split(",")]
        cfg.append(", ".join(f"{p[0].split('.')[1]}'s length-scale fixed"
                             + (f" at {p[1]}" if len(p) > 1 else " at its set-up value")
                             for p in parts))
    if d.get("fixed_inducing"):
        cfg.append("inducing inputs fixed")
    if d.get("jitter"):
        cfg.append(f"jitter {d['jitter']:g}")
    cfg.append(f"accept {d['target_accept']:g}")
    if "quiet" in name:
        cfg.append("rerun alone on the machine")
    cpu = sum(d["cpu_seconds_per_chain"])
    missed = [k for k, bad in (("R-hat", d["max_rhat"] > TARGETS["nuts_rhat"]),
                               ("ESS", d["min_ess_bulk"] < TARGETS["nuts_ess"]),
                               ("divergences", d["divergences"] > 0), ("time", cpu > TARGETS["nuts_cpu_s"])) if bad]
    return {"key": (model, not observed, d.get("priors") is None, d["environment"]["date"], name),
            "model": model, "observed": observed, "met": not missed,
            "row": [model, obs, "yes" if d.get("priors") else "no (fixed)", sampler, ", ".join(cfg),
                    f"{'VI' if d.get('init') == 'vi' else 'MAP'}, {d.get('seed', 0)}",
                    f"{d['chains']} × ({d['warmup']} + {d['draws']})", f"{d['max_rhat']:.3f}",
                    f"{d['min_ess_bulk']:.0f}", d["divergences"], f"{d['mean_tree_depth']:.2f}", f"{cpu:.0f}",
                    "met" if not missed else "not met (" + ", ".join(missed) + ")"]}


def sec_nuts(R):
    names = R.glob("nuts_mixing_*.json")
    ms = {}
    for n in names:
        ms.setdefault(R(n)["model"], []).append(_m(R(n)))
    common_m = {k: max(sorted(set(v)), key=v.count) for k, v in ms.items()}
    runs = sorted((_nuts_row(n, R(n), common_m) for n in names), key=lambda r: r["key"])
    groups = {}
    for r in runs:
        groups.setdefault((r["model"], r["observed"]), []).append(r["met"])
    label = {("chain", True): "the chain with every node observed",
             ("chain", False): "the latent chain (only b observed)",
             ("collider", True): "the collider with every node observed",
             ("collider", False): "the latent collider (only w3 observed)"}
    counts = "; ".join(f"{label[k]}: {sum(v)} of {len(v)} runs" for k, v in sorted(groups.items()))
    fixed = {}
    for n in names:
        x = R(n)
        if (not x.get("observe_hidden") and "=" in (x.get("fix_child_lengthscale") or "")
                and x.get("fix_latent_variance")):
            fixed.setdefault(x["model"], []).append(x.get("targets_met", False))
    fixed_txt = " and ".join(f"the latent {k} in {sum(v)} of {len(v)} runs" for k, v in sorted(fixed.items()))
    cmp = R("nuts_mixing_collider_fixed_block_collapsed_compiled.json")["comparison"]
    quiet = R("nuts_mixing_collider_block_collapsed_observed_accept09_traced_quiet.json")
    loud = R("nuts_mixing_collider_block_collapsed_observed_accept09_traced.json")
    stack = [R(n) for n in names if "stacking" in R(n)]
    stack_lines = []
    ks = []
    for s in sorted(stack, key=lambda x: x.get("seed", 0)):
        st = s["stacking"]
        ks += st["max_pareto_k_per_chain"]
        nonstat = sum(x > TARGETS["halves_rhat"] for x in st["max_rhat_per_chain"])
        stack_lines.append(f"seed {s.get('seed', 0)} (R-hat {s['max_rhat']:.3f}): {st['rmse_leaf_pooled']:.3f} → "
                           f"{st['rmse_leaf_stacked']:.3f}, {nonstat}/{len(st['weights'])} chains non-stationary")
    seed2 = [s for s in stack if s.get("seed") == 2]
    modes = ""
    if seed2:
        pc = seed2[0]["per_chain_means"]["kernels.w3.base.lengthscale"]
        ll = seed2[0]["per_chain_mean_log_likelihood"]
        modes = (f" (seed {seed2[0]['seed']}: the chains from one start settle at `w3` length-scales "
                 + " / ".join(f"{x:.2f}" for x in pc) + " with the data's log-likelihood "
                 + " / ".join(f"{x:.1f}" for x in ll) + ")")
    tab = table(["model", "observed", "hyperpriors", "sampler", "configuration", "start, seed",
                 "chains × (warm-up + draws)", "max R-hat", "min bulk ESS", "divergences", "mean tree depth",
                 "CPU s, all chains", "target"], [r["row"] for r in runs])
    notes = [para(f"""One row per `nuts_mixing.py` results file. Target: R-hat ≤ {TARGETS['nuts_rhat']} and bulk ESS ≥
        {TARGETS['nuts_ess']} for every inducing output and hyperparameter, no divergences, ≤ {TARGETS['nuts_cpu_s']}
        CPU s
        for all chains (compilation included). M is {' and '.join(f'{v} ({k})' for k, v in sorted(common_m.items()))}
        unless the configuration says otherwise. Chains run one
        after the other from a MAP (or mean-field VI) start, node values non-centred; *collapsed*: `collapse="inducing"`
        (the observed leaf's inducing outputs integrated out, an observed node with children in posterior-whitened
        coordinates); *dense block*: a dense mass matrix over the hidden inducing outputs and the hyperparameters. R-hat
        is unrounded in the later runs. CPU seconds are noisy across rows: the same command took
        {sum(quiet['cpu_seconds_per_chain']):.0f} CPU s alone on the machine and
        {sum(loud['cpu_seconds_per_chain']):.0f}
        s under load."""),
             para(f"""Runs meeting the whole target: {counts}. Where every node is observed the posterior is identified
        and `CompiledNUTS` with `collapse="inducing"` mixes within the budget. A hidden node is identified only up to a
        monotone warping that its child's GP undoes, so with priors on its kernel the chains disagree; with the hidden
        kernels fixed (`set_hyperpriors(model, fix_latent_kernels=True)`) and Matérn, {fixed_txt} meet the target;
        the latent collider's posterior has several modes{modes}, which R-hat rightly
        reports. The joint MAP start is degenerate (the noise falls towards 0), and before a fix it also moved the
        kernels, noise and inducing inputs that the NUTS model kept (`--fixed-inducing` keeps the set-up ones)."""),
             para(f"""Against the mixed NUTS reference of the latent collider with fixed hyperparameters (`--compare`):
        corr(w1, w2) {cmp['nuts']['mean_corr']:.2f} and variance {cmp['nuts']['mean_var1']:.2f} per parent; DAG-SVI
        {cmp['DAG-SVI']['mean_corr']:.3f} and {cmp['DAG-SVI']['mean_var1']:.3f}; DAG-VI {cmp['DAG-VI']['mean_corr']:.3f}
        and {cmp['DAG-VI']['mean_var1']:.1e}: the structured guide gets the correlation, both are far too narrow."""),
             para(f"""Chain stacking (`pyro_dag.diagnostics.chain_stacking`, Yao, Vehtari & Gelman 2022) on the latent
        collider with fixed Matérn-5/2 hidden kernels, RMSE of `w3`'s posterior mean pooled → stacked (R-hat of each
        chain's halves above {TARGETS['halves_rhat']}: non-stationary): {'; '.join(stack_lines)}. Where the chains
        disagree the stacked mean beats the pooled one; where they agree the weights are noise. Pareto k̂ exceeds
        {TARGETS['pareto_k']} on every chain ({rng(ks, 2)}), so the weights are not reliable,
        and chains moving between modes break stacking's premise: neither NUTS nor stacking certifies the latent
        collider's posterior at this budget.""")]
    return Section("NUTS mixing: does NUTS mix on the DAG-DGP models?",
                   "`python benchmarks/nuts_mixing.py --model chain|collider ...` (each file's options in its name)",
                   tab, notes, names)


def sec_traced(R):
    d = R("traced_nuts.json")
    rows = []
    for m, r in d["models"].items():
        gm, ch = r["gradient_ms"], r["chain"]
        rows.append([m, f"{gm['eager']:.2f}", f"{gm['traced']:.2f} ({gm['eager'] / gm['traced']:.1f}×)",
                     f"{gm['compiled']:.2f} ({gm['eager'] / gm['compiled']:.1f}×)",
                     f"{r['max_gradient_diff']['traced']:.0e} / {r['max_gradient_diff']['compiled']:.0e}",
                     f"{r['compile_seconds']:.0f}", f"{ch['eager']['cpu_s']:.1f}",
                     f"{ch['traced']['cpu_s']:.1f} ({ch['eager']['cpu_s'] / ch['traced']['cpu_s']:.1f}×)",
                     f"{ch['compiled']['cpu_s']:.1f} ({ch['eager']['cpu_s'] / ch['compiled']['cpu_s']:.1f}×)",
                     " / ".join("yes" if r["same_trajectory"][k] else "no" for k in ("traced", "compiled"))])
    elbo = all("dagelbo" in r["gradient_ms"] for r in d["models"].values())
    if elbo:   # issue 43: a potential gradient against one DAGELBO gradient of the same model's SVI counterpart
        for row, r in zip(rows, d["models"].values()):
            gm = r["gradient_ms"]
            row[1:1] = [f"{gm['dagelbo']:.2f}"]
            row[2] += f" ({gm['eager'] / gm['dagelbo']:.2f}× DAGELBO)"
            row[3] += f", {gm['traced'] / gm['dagelbo']:.2f}× DAGELBO"
    tab = table(["model (observed)"] + (["ms per DAGELBO gradient"] if elbo else [])
                + ["ms per gradient, NUTS", "TracedNUTS", "CompiledNUTS",
                   "max gradient difference, traced / compiled", "compile s (wall)", "CPU s per chain, NUTS",
                   "TracedNUTS", "CompiledNUTS", "same trajectory as NUTS, traced / compiled"], rows)
    if all(r["same_trajectory"]["traced"] for r in d["models"].values()):
        traced_same = "`TracedNUTS` replays Pyro's chain bit for bit."
    else:   # since the fused ops of pyro_dag.ops: the trace replays their plain composition, whose gradient rounds apart
        traced_same = (f"""`TracedNUTS`'s gradient differs from the eager one by rounding (at most
            {max(r['max_gradient_diff']['traced'] for r in d['models'].values()):.0e} here: the trace replays the
            plain composition of the library's fused operations, whose hand-written backward passes eager mode runs),
            so its chain parts from Pyro's after a while and the chain seconds compare similar, not identical,
            work.""")
    notes = [para(f"""One thread; gradient at the initial point (minimum over {d['rounds']} rounds of {d['calls']}
        calls),
        then one chain of each, 1 × ({d['warmup']} + {d['draws']}), from the same MAP start and seed;
        `collapse="inducing"`
        and hyperpriors. {traced_same} `CompiledNUTS` agrees to rounding, so its draws part from the eager ones after a
        while (similar, not identical, work), and it checks the compiled gradient against the uncompiled recording
        before the first step (TorchInductor's in-place buffer reuse, which miscompiled these gradients, is switched
        off).""")]
    if elbo:
        worst = {k: max(r["gradient_ms"][k] / r["gradient_ms"]["dagelbo"] for r in d["models"].values())
                 for k in ("eager", "traced")}
        notes.append(para(f"""*ms per DAGELBO gradient*: one `DAGELBO().loss_and_grads` of the variational
            counterpart of each model (the same graph, data, inducing points and likelihoods, `sample_f=False`, no
            hyperpriors, `AutoStructuredGuide(model)`), timed in the same interleaved rounds. Issue 43's target, a
            potential gradient within {TARGETS['nuts_vs_elbo']}× one DAGELBO gradient on the same model: Pyro's NUTS
            at most {worst['eager']:.2f}× ({yes(worst['eager'] <= TARGETS['nuts_vs_elbo'])}), `TracedNUTS` (the
            documentation's sampler) at most {worst['traced']:.2f}×
            ({yes(worst['traced'] <= TARGETS['nuts_vs_elbo'])})."""))
    return Section("TracedNUTS and CompiledNUTS against Pyro's NUTS: how much cheaper is a gradient?",
                   "`python benchmarks/traced_nuts.py`", tab, notes, ["traced_nuts.json"])


def sec_guide_mcmc(R):
    if not os.path.exists(os.path.join(R.folder, "guide_mcmc.json")):
        return None
    d = R("guide_mcmc.json")
    labels = {"guide": "user guide: `examples/guide/pyro_interop.py` (NUTS) and `mcmc_arviz.py` (TracedNUTS)",
              "tutorial": "tutorial: `tutorials/mcmc_arviz.py`"}
    rows, verdicts = [], []
    for part, r in d["parts"].items():
        cells = r.get("cells") or (r.get("partial") or {}).get("cells", [])
        for c in cells:
            if c["gradients"] == 0 and c["cpu_s"] < 1:
                continue
            ms = 1e3 * c["gradient_cpu_s"] / c["gradients"] if c["gradients"] else None
            rows.append([labels[part], c["cell"], f"{c['cpu_s']:.1f}", str(c["gradients"]),
                         f"{c['gradient_cpu_s']:.1f}", f(ms, 2)])
        if "error" in r:
            run = (r.get("partial") or {}).get("running")
            if run:
                rows.append([labels[part], "(the cell running at the timeout)", f"{run['cell_cpu_s']:.1f}",
                             str(run["gradients"]), f"{run['gradient_cpu_s']:.1f}",
                             f(1e3 * run["gradient_cpu_s"] / max(run["gradients"], 1), 2)])
            verdicts.append(f"{labels[part]}: {r['error']}")
            continue
        dg, dr = r["diagnostics"], r["draws"]
        mcmc_cpu = sum(c["cpu_s"] for c in r["cells"] if c["gradients"])
        rhat = (f"max R-hat {dg['rhat_max']:.3f}" if dg["rhat_max"] == dg["rhat_max"]
                else "no R-hat (ArviZ needs two chains; the example runs one and states none)")
        text = (f"{labels[part]}: {r['total_cpu_s']:.0f} CPU s in all, {mcmc_cpu:.1f} in the cells that run NUTS "
                f"({yes(mcmc_cpu < 120)} against 2 CPU minutes); {dr['chains']} chain(s) × ({dr['warmup']} + "
                f"{dr['samples']}), {rhat}, min bulk ESS {dg['ess_bulk_min']:.0f} over {dg['variables']} "
                f"variables, {r['divergences']} divergences")
        if "diagnostics_hyperparameters" in r:
            dh = r["diagnostics_hyperparameters"]
            text += (f" (the hyperparameters it prints: R-hat {dh['rhat_max']:.3f}, bulk ESS "
                     f"{dh['ess_bulk_min']:.0f})")
        verdicts.append(text)
    tab = table(["example", "cell", "CPU s", "potential gradients", "of which gradient CPU s", "ms per gradient"],
                rows)
    notes = [para(f"""The documentation's MCMC examples run as written, one thread, each part a fresh process
        (`benchmarks/guide_mcmc.py`): the user guide's examples in order (they continue one another), and the MCMC
        tutorial cell by cell. Every NUTS potential gradient goes through Pyro's `potential_grad`, wrapped to count
        them and their CPU seconds; the rest of a NUTS cell is the sampler's own work (trajectory bookkeeping, mass
        matrix and step-size adaptation), the trace and the conversion to ArviZ. R-hat is ArviZ's rank-normalised
        split R-hat over the chains. Issue 43's target, the guide's example under 2 CPU minutes with its
        stated R-hat: {'; '.join(verdicts)}. Load average {', '.join(f'{x:.1f}' for x in
        max((r.get('load', [0, 0, 0]) for r in d['parts'].values()), key=lambda v: v[0]))} at the end of the
        busiest part, 2 cores, shared. {code_note([d])}""")]
    if "tutorial" not in d["parts"]:
        notes.append(para("""Not run yet: the tutorial (`tutorials/mcmc_arviz.py`, `TracedNUTS`, 2 chains × (300 +
            300), tree depth up to 7; issue 43 projected 8-16 CPU minutes for a 2 × (200 + 200) version of it).
            From the TracedNUTS rows above (a chain of the same kind, 1 × (60 + 30), took 80 CPU s with
            TracedNUTS and 32 with CompiledNUTS, compilation included), its 1200 iterations are projected at
            several CPU minutes with TracedNUTS; `--parts tutorial` measures it."""))
    return Section("Do the documentation's MCMC examples run in minutes? (guide MCMC)",
                   "`python benchmarks/guide_mcmc.py --parts guide tutorial` (under the shared lock)", tab, notes,
                   ["guide_mcmc.json"])


def sec_nuts_release(R):
    if not os.path.exists(os.path.join(R.folder, "nuts_release.json")):
        return None
    d = R("nuts_release.json")
    rows, verdicts = [], []
    for r in d["rows"]:
        base = next((b for b in d["rows"] if b["model"] == r["model"] and b["label"] == "release NUTS"
                     and "error" not in b), None)
        if "error" in r:
            rows.append([r["model"], r["label"], r["tree"], r["error"][:80], "", "", "", "", ""])
            continue
        per_it = f"{r['cpu_per_iteration']:.3f}"
        ratio = r["cpu_per_iteration"] / base["cpu_per_iteration"] if base else None
        div = "–" if r["divergences"] is None else f"{r['divergences']} / {r['draws']}"
        rows.append([r["model"], r["label"], r["tree"], per_it, f(ratio, 2), f"{r['gradients_per_iteration']:.1f}",
                     f"{r['ms_per_gradient']:.2f}", f(r.get("compile_wall_s"), 1), div])
        if base and r["label"] == "NUTS":
            # a chain whose draws are mostly divergent has not adapted: its trajectories stop early, and a ratio of
            # such chains says nothing about what an adapted one costs (the per-effective-draw section does)
            unadapted = [x for x in (base, r) if x["divergences"] is not None and 2 * x["divergences"] > x["draws"]]
            said = " and ".join(f"{x['label']} {x['divergences']} / {x['draws']}" for x in unadapted)
            verdict = f"not judged, draws divergent: {said}; the next section" if unadapted else yes(ratio <= 1)
            verdicts.append(f"{r['model']}: NUTS {r['cpu_per_iteration']:.3f} against {base['cpu_per_iteration']:.3f} "
                            f"CPU s per iteration ({ratio:.2f}x; {verdict})")
    tab = table(["model", "variant", "tree", "CPU s per iteration", "/ release", "gradients per iteration",
                 "ms per gradient", "compile s (wall)", "divergent draws"], rows)
    descriptions = {}
    for r in d["rows"]:
        descriptions.setdefault(r["model"], r.get("model_description", r["model"]))
    notes = [para(f"""One chain per variant, seed 0, one thread, each a fresh process (`benchmarks/nuts_release.py`);
        the release is {d['previous_commit']} (before the data-driven defaults), `git archive`-d. Models:
        {'; '.join(f'`{k}`: {v}' for k, v in descriptions.items())}. Every potential gradient goes through Pyro's
        `potential_grad`, wrapped to count them, so the cost per iteration splits into gradients per iteration
        (the posterior's geometry and the step size NUTS adapts: it doubles its trajectory until it turns, up to
        2^10 gradients) and CPU per gradient (the code). `NUTS, release noise and kernel start`: this tree with
        `noise="learned", kernel_init="default"`, which isolates the data-driven defaults. `CompiledNUTS`'s CPU
        seconds are this process's, compilation included; the compiler's worker processes are not counted, so its
        wall seconds of recording and compiling are given apart. A chain whose draws are mostly divergent has not adapted
        (20 warm-up iterations are few), and its cost per iteration says little; a divergent trajectory also stops
        early, so a chain with fewer divergences can cost more per iteration at the same cost per gradient. The next
        section runs adapted chains (200 warm-up iterations) and counts effective draws, which is what a user pays. Issue 43's
        target, NUTS per
        iteration at most the release's on the same model: {'; '.join(verdicts)}. Load average
        {', '.join(f'{x:.1f}' for x in d['load'])} at the end, 2 cores, shared. {code_note([d])}""")]
    return Section("Does NUTS cost more per iteration than in the release before the data-driven defaults?",
                   "`python benchmarks/nuts_release.py` (under the shared lock)", tab, notes, ["nuts_release.json"])


def sec_nuts_release_ess(R):
    """Cost per effective draw of NUTS, this tree against the release (``nuts_release.py --out nuts_release_ess``)."""
    if not os.path.exists(os.path.join(R.folder, "nuts_release_ess.json")):
        return None
    d = R("nuts_release_ess.json")
    rows, by = [], {}
    for r in d["rows"]:
        if "error" in r:
            rows.append([r["model"], r["label"], str(r.get("seed", 0)), r["error"][:60], "", "", "", "", ""])
            continue
        per_eff = r["cpu_s"] / r["ess_min"] if r.get("ess_min") else None
        by.setdefault(r["model"], {}).setdefault(r["label"], []).append((r["cpu_per_iteration"], per_eff))
        div = "–" if r["divergences"] is None else f"{r['divergences']} / {r['draws']}"
        rows.append([r["model"], r["label"], str(r.get("seed", 0)), f"{r['cpu_per_iteration']:.3f}",
                     f"{r['gradients_per_iteration']:.1f}", f"{r['ess_min']:.0f} / {r['ess_median']:.0f}",
                     f(per_eff, 3), div, str(r.get("scalars", ""))])
    tab = table(["model", "variant", "seed", "CPU s per iteration", "gradients per iteration",
                 "bulk ESS: smallest / median", "CPU s per effective draw", "divergent draws", "scalars"], rows)
    verdicts = []
    for model, labels in by.items():
        for label in [x for x in labels if x != "release NUTS"] if "release NUTS" in labels else []:
            a, b = labels["release NUTS"], labels[label]
            it = mean([x[0] for x in b]) / mean([x[0] for x in a])
            eff = [x[1] for x in a if x[1]], [x[1] for x in b if x[1]]
            ratio = mean(eff[1]) / mean(eff[0]) if eff[0] and eff[1] else None
            verdict = f"{yes(ratio is not None and ratio <= 1)}; " if label == "NUTS" else ""
            verdicts.append(f"`{model}`, {label}: per iteration {it:.2f}x the release's, per effective draw "
                            f"{f(ratio, 2)}x ({verdict}mean over {len(a)} / {len(b)} chains)")
    notes = [para(f"""Each chain a fresh process, one thread, {d['rows'][0]['warmup']} warm-up iterations and
        {d['rows'][0]['draws']} draws; the effective draws are Pyro's bulk ESS (`pyro.ops.stats.effective_sample_size`,
        one chain) of every scalar the chain samples (the last column counts them: `guide` samples the 5 inducing
        outputs, `guide_collapsed` the length-scale, amplitude and noise, `chain` the 5 + 5 inducing outputs of `h` and `y` and
        the 24 whitened draws of `h`'s function values, `h.eps`; with `collapse="inducing"` 29, `h.z` and `h.eps` in
        posterior-whitened coordinates, `y`'s inducing outputs integrated out), and a chain's cost per effective draw is its CPU
        seconds over the smallest of them. The release is
        {d['previous_commit']}, `git archive`-d. A healthier chain (fewer divergent transitions, which stop a
        trajectory early) costs more per iteration: per effective draw is what a user pays. {'; '.join(verdicts)}.
        Load average {', '.join(f'{x:.1f}' for x in d['load'])} at the end, 2 cores, shared. {code_note([d])}""")]
    return Section("Does NUTS cost more per effective draw than in the release?",
                   f"`{d.get('command', 'python benchmarks/nuts_release.py --out nuts_release_ess')}` (under the "
                   "shared lock)", tab, notes, ["nuts_release_ess.json"])


def sec_sbc(R):
    d = R("sbc.json")
    res = d["results"]
    names = res["nuts"]["names"]
    rows = [[m] + [f"{p:.3f}" if p >= 1e-3 else f"{p:.0e}" for p in res[m]["pvalue"]] for m in res]
    thr = TARGETS["sbc_alpha"] / len(names)
    nuts_min = min(res["nuts"]["pvalue"])
    hyper = [i for i, n in enumerate(names) if not n.startswith("a.u")]
    guide_max = max(res[m]["pvalue"][i] for m in res if m != "nuts" for i in hyper)
    r0 = res["nuts"]
    tab = table(["method"] + [f"`{n}`" for n in names], rows)
    notes = [para(f"""`x → a` with hyperpriors, n = {d['n']}, M = {d['num_inducing']}; NUTS {d['warmup']} + {d['draws']}
        draws thinned by {d['thin']} on `collapse="inducing"`; the guides {d['svi_steps']} DAGELBO steps;
        {d['replications']} replications, {r0['num_bins']} rank bins (Talts et al. 2018). NUTS is
        {'not rejected' if nuts_min > thr else '**rejected**'} (smallest p {nuts_min:.3f} against the Bonferroni
        threshold
        {thr:.4f}); the guides are rejected on the hyperparameters (p ≤ {guide_max:.0e}): noise biased upwards, kernel
        hyperparameters under-dispersed, as expected of a short Gaussian fit on few cases (a diagnostic, not a
        target).""")]
    return Section("Are the posteriors calibrated? (simulation-based calibration)",
                   f"`python benchmarks/sbc.py --replications {d['replications']} --methods {','.join(res)}`", tab,
                   notes,
                   ["sbc.json"])


def sec_prior_collapse(R):
    d = R("prior_collapse.json")
    a = d["fig3a"]
    rows = []
    a_ok = all(r["mean"] >= r["bound"] for r in a)
    rows.append(["(a) Theorem 1: fraction of deep slices with M_l above the threshold", f"s = {a[0]['s']}-{a[-1]['s']}",
                 f"s = {a[1]['s']}: {a[1]['mean']:.2f} vs {a[1]['bound']:.2f}; "
                 f"s = {a[-1]['s']}: {a[-1]['mean']:.2f} vs "
                 f"{a[-1]['bound']:.2f}", "yes" if a_ok else "no"])
    fb = sorted(d["fig3b"].items(), key=lambda kv: int(kv[0]))
    last = len(fb[0][1]["C_mc"]) - 1
    rows.append(["(b) Prop. 4, product SE fusion: C_l = E‖Δ_w‖²", "k = " + ", ".join(k for k, _ in fb),
                 f"l = {last}: " + "; ".join(f"{r['C_mc'][-1]:.3f} vs {r['C_bound'][-1]:.3f}" for _, r in fb),
                 "yes" if all(r["bound_holds"] for _, r in fb) else "no"])
    for b, r in sorted(d["fig3c"].items(), key=lambda kv: int(kv[0])):
        last = r["by_depth"][str(len(r["by_depth"]) - 1)]
        rows.append(["(c) Prop. 6, b-ary branching: survival to depth L", f"b = {b} (b p_t = {r['b_p_t']:.2f})",
                     f"L = {len(r['by_depth']) - 1}: {last['survival_mc']:.3f} ± {last['se']:.3f} vs "
                     f"{last['bound']:.3f}; all depths: {r['bound_all_depths']:.3f}",
                     "yes" if r["bound_holds"] else "no"])
    for geo, r in d["fig3d"].items():
        s0, sl = r["by_step"][1], r["by_step"][-1]
        rows.append(["(d) Theorem 2, Gaussian refresh: P(M_{l0+h} > ε)", geo.replace("_", " "),
                     f"h = {s0['h']}: {s0['mc']:.3f} vs {s0['bound']:.3f}; h = {sl['h']}: {sl['mc']:.3f} vs "
                     f"{sl['bound']:.3f}", "yes" if r["bound_holds"] else "no"])
    tab = table(["panel (Perlino et al. 2026, Fig. 3)", "setting", "simulated vs bound", "bound holds"], rows)
    notes = [para(f"""Monte Carlo of the DAG-DGP prior against the bounds of the paper's Sec. 4
        (`pyro_dag.diagnostics`):
        {d['realisations']} realisations × {d['draws']} draws for (a)-(b), {d['branch_draws']} for (c),
        {d['refresh_draws']}
        for (d); (b) is an upper bound, the others lower bounds; *holds*: within Monte Carlo error (the script's
        criterion). The paper
        gives no numbers for Fig. 3, so the comparison is with its bounds; our reading of the details it leaves open
        is in
        `benchmarks/prior_collapse.py`.""")]
    return Section("Do the prior-collapse bounds hold?", f"`python benchmarks/prior_collapse.py --realisations "
                   f"{d['realisations']} --draws {d['draws']} --branch-draws {d['branch_draws']} --refresh-draws "
                   f"{d['refresh_draws']}`", tab, notes, ["prior_collapse.json"])


# ----------------------------------------------------------------------------------------------------------------
# Sections: applications (Sachs regression, multi-fidelity emulation, LaMP-DGP, latent SEMs)
# ----------------------------------------------------------------------------------------------------------------
def sec_sachs_regression(R):
    d = R("sachs_regression.json")
    diag = R("sachs_regression_diagnosis.json")
    paper = script_constant("pyro_dag/experiments/sachs.py", "PAPER")
    paper_sd = script_constant("benchmarks/sachs_regression.py", "PAPER_SD")
    by, methods = {}, []
    for r in d["rows"]:
        by[(r["task"], r["method"].split(",")[0])] = r
        if r["method"] not in methods:
            methods.append(r["method"])
    tasks = ("interpolation", "extrapolation")
    rows = []
    for meth in methods:
        rs = {r["task"]: r for r in d["rows"] if r["method"] == meth}
        row = [meth, "/".join(str(len(rs[tk]["seeds"])) for tk in tasks if tk in rs)]
        for tk in tasks:
            r = rs.get(tk)
            row += ["–"] * 5 if r is None else [mse([x["rmse"] for x in r["all"]]), mse([x["crps"] for x in r["all"]]),
                                               mse([x["nlpd"] for x in r["all"]]),
                                               mse([x.get("picp") for x in r["all"]], 2)
                                               if any(x.get("picp") is not None for x in r["all"]) else "n.r.",
                                               mse([x["rmse"] for x in r["log"]])]
        row.append(" / ".join(f"{mean(rs[tk]['seconds']):.0f}" for tk in tasks if tk in rs))
        stops = [", ".join(str(s) for s in rs[tk]["ng_stopped"]) for tk in tasks
                 if tk in rs and not all(s is None for s in rs[tk]["ng_stopped"])]
        row.append(" / ".join(stops) or "–")
        rows.append(row)
        if meth.startswith("DAG-VI"):
            for m, lab in (("dag_vi", "DAG-VI"), ("dag_svi", "DAG-SVI")):
                row = [f"paper: {lab}", "–"]
                for tk in tasks:
                    pp, sd = paper[tk][m], paper_sd.get(tk, {}).get(m, {})
                    row += [(f"{pp[k]:.3f}" + (f" (sd {sd[k]:.3f})" if k in sd else "")) if k in pp else "–"
                            for k in ("rmse", "crps", "nlpd")] + ["–", "–"]
                rows.append(row + ["–", "–"])
    verdict = []
    for task in ("interpolation", "extrapolation"):
        svi, vi = by[(task, "DAG-SVI")], by[(task, "DAG-VI")]
        a = mean([x["rmse"] for x in svi["all"]])
        lg = mean([x["rmse"] for x in svi["log"]])
        target = paper[task]["dag_svi"]["rmse"]
        diffs = [s["rmse"] - v["rmse"] for s, v in zip(svi["all"], vi["all"])]
        verdict.append(f"{task}: DAG-SVI RMSE {a:.3f} standardised / {lg:.3f} log units against the paper's "
                       f"{target:.3f} ({yes(a <= target, 'met', 'missed')} / {yes(lg <= target, 'met', 'missed')}); "
                       f"DAG-SVI − DAG-VI paired over "
                       f"seeds {mean(diffs):+.3f} ± {se(diffs):.3f}")
    ng = [s for r in d["rows"] if r["method"].startswith("DAG-SVI") for s in r["ng_stopped"] if s not in (None, "no")]
    nsvi = sum(len(r["ng_stopped"]) for r in d["rows"] if r["method"].startswith("DAG-SVI"))
    ex = [v for k, v in diag["splits"].items() if k.startswith("extrapolation")]
    it = [v for k, v in diag["splits"].items() if k.startswith("interpolation")]
    plcg = [a for a in diag["angles"] if a["degrees_from_PKC_axis"] == 90]
    tab = table(["method", "seeds"] + [f"{tk[:6]}. {k}" for tk in tasks for k in ("RMSE", "CRPS", "NLPD", "PICP95",
                                                                                 "RMSE, log units")]
                + ["CPU s / split", "NG stopped at"], rows)
    notes = [para("""Perlino et al. 2026, Sec. 6: the cd3cd28icam2 data (log, standardised with the training cases'
        statistics), the bnlearn DAG with PKC and Plcg as roots and latent confounders into PKA and Raf (DAG-SVI/VI
        only);
        test predictions propagate from the roots, the test cases' PKA and Raf only infer the latents. Scores averaged
        over
        the GP nodes (PICP and the nodes other than PKA and Raf are in the JSON); *log units*: RMSE times each node's
        training sd (the paper's unit is not stated); *observed parents*: baselines given the parents' observed test
        values. Mean ± s.e. over splits (interp. / extrap.), every method on the same splits; *NG stopped at*: where
        `train`'s guard ended the natural-gradient phase. Our runs use
        the `recommended` recipe, not the paper's longer Adam protocol (`--recipe paper`, not run)."""),
             para(f"""Targets: {'; '.join(verdict)}. DAG-SVI trails DAG-VI: the short recipe under-optimises it (the
        guard
        fired in {len(ng)} of {nsvi} runs). The extrapolation splits are hard for every method: a
        {diag['k']}-nearest-neighbour regression on each node's observed parents that sees all cases scores
        {mean([v['knn_rmse'] for v in ex]):.2f} on their test cases ({mean([v['knn_rmse'] for v in it]):.2f} on the
        interpolation splits, {plcg[0]['knn_rmse']:.2f} along Plcg; `--diagnose`), near where every method lands.""")]
    return Section("Does DAG-SVI reproduce the paper's Sachs regression?",
                   f"`python benchmarks/sachs_regression.py --recipe recommended --seeds "
                   f"{' '.join(str(s) for s in d['rows'][0]['seeds'])} --resume`, then "
                   "`--table`", tab, notes, ["sachs_regression.json", "sachs_regression_diagnosis.json"])


def _mf_merge(R, stem):
    merged = {}
    for name in R.glob(f"{stem}*.json"):
        if name.endswith("_smoke.json"):
            continue
        for prob, r in R(name)["results"].items():
            if r.get("summary"):
                merged.setdefault(prob, {}).update(r["summary"])
    return merged


def _mf_rows(merged, with_es=False):
    rows = []
    for prob, summ in merged.items():
        ok = {m: s for m, s in summ.items() if "rmse" in s}
        best = {k: min((s[k][0] for s in ok.values() if k in s), default=None)
                for k in ("rmse", "crps", "energy_score")}

        def cell(s, k):
            if k not in s:
                return "—"
            b = "**" if s[k][0] == best[k] else ""
            return f"{b}{s[k][0]:.4g} ± {s[k][1]:.2g}{b}"
        for m, s in sorted(ok.items(), key=lambda kv: "noise fixed" in kv[0]):
            cpu = f"{s['cpu_seconds'][0]:.1f}" if "cpu_seconds" in s else "—"
            rows.append([prob, m] + ([cell(s, "energy_score")] if with_es else [])
                        + [cell(s, "rmse"), f"{s['nrmse'][0]:.3f}", cell(s, "crps"),
                           calib_cell(s, crps=None), f"{s['seconds'][0]:.1f}", cpu,
                           s["rmse"][2]])
    return rows


MF_COLUMNS = ["HF GP", "emukit AR1", "emukit NARGP", "DAG-VI", "DAG-SVI", "DAG-SVI, NARGP kernel",
              "DAG-SVI, M = runs, noise fixed"]


def _mf_column(method):
    if "noise fixed" in method:
        return "DAG-SVI, M = runs, noise fixed", (" (NARGP kernel)" if "NARGP kernel" in method else "")
    if method.startswith("emukit AR1") or method.startswith("emukit NARGP"):
        base = "emukit AR1" if "AR1" in method else "emukit NARGP"
        return base, method[len(base):]
    return {"DAG-VI (MultiFidelity)": "DAG-VI", "DAG-SVI (MultiFidelity)": "DAG-SVI",
            "DAG-SVI (NARGP kernel)": "DAG-SVI, NARGP kernel"}.get(method, method), ""


def _mf_pivot(merged):
    """One row per problem: RMSE / CRPS of each method (the better variant where a method has several), best bold."""
    cols = list(MF_COLUMNS)
    for summ in merged.values():
        for m in summ:
            c, _ = _mf_column(m)
            if c not in cols:
                cols.append(c)
    rows = []
    for prob, summ in merged.items():
        ok = {m: s for m, s in summ.items() if "rmse" in s}
        best = min(s["rmse"][0] for s in ok.values())
        cells, seeds = {}, set()
        for m, s in ok.items():
            c, tag = _mf_column(m)
            if c not in cells or s["rmse"][0] < cells[c][0]:
                cells[c] = (s["rmse"][0], s["crps"][0], tag, s["rmse"][2])
            seeds.add(s["rmse"][2])
        row = [prob, "/".join(str(x) for x in sorted(seeds))]
        for c in cols:
            if c not in cells:
                row.append("–")
                continue
            r, cr, tag, _ = cells[c]
            b = "**" if r == best else ""
            row.append(f"{b}{r:.4g}{b} / {cr:.3g}{tag}")
        rows.append(row)
    return ["problem", "seeds"] + cols, rows


def sec_mf_auto(R):
    """The emulator's default fit() against emukit AR1 / NARGP and a linked GP (benchmarks/multifidelity_auto.py)."""
    names = R.glob("multifidelity_auto*.json")
    if not names:
        return None
    files = [R(n) for n in names]
    rows, linked, shares, peer_band = [], [], [], {}
    peers = ("emukit_ar1", "emukit_nargp", "linked_gp")
    label = {"ours": "fit()", "emukit_ar1": "AR1", "emukit_nargp": "NARGP", "linked_gp": "linked GP"}
    # the linked system re-measured alone (``--draws '' --linked 5 --out multifidelity_auto_linked``) replaces the
    # streams that came with the named run, measured before the deterministic amplitude rule changed
    linked_only = [d for n, d in zip(names, files) if n == "multifidelity_auto_linked.json"]
    for d in files:
        if not linked_only:
            linked += d.get("linked", [])
        for r in d["rows"]:
            m = r["methods"]
            o = m["ours"]
            if "rmse" not in o:
                rows.append([r["problem"], str(r.get("seed", 0)), "error", o.get("error", "")[:60]] + [""] * 10)
                continue
            chosen = ", ".join(f"{f}: {k}" for f, k in o["selection"]["chosen"].items() if k != "rbf")

            def peer_txt(key, fmt):
                return " / ".join(fmt.format(m[p][key]) if key in m[p] else "err" for p in peers)
            rows.append([r["problem"], str(r.get("seed", 0)), f"{o['rmse']:.3g}", peer_txt("rmse", "{:.3g}"),
                         f"{o['rmse_ratio']:.2f}" + ("" if o["meets_rmse"] else " **x**"),
                         f"{o['cpu_seconds']:.1f} / {m[o['best_peer']]['cpu_seconds']:.1f}",
                         f"{o['cpu_ratio']:.2f}" + ("" if o["meets_cpu"] else " **x**"),
                         f"{o['picp95']:.2f}" + ("" if o["meets_picp"] else " **x**"), peer_txt("picp95", "{:.2f}"),
                         f"{o['crps']:.3g}", peer_txt("crps", "{:.3g}"), f"{o['nlpd']:.2f}",
                         peer_txt("nlpd", "{:.2f}"), chosen])
            shares.append((r["problem"].startswith("random-"), o["meets_rmse"], o["meets_cpu"], o["meets_picp"],
                           o["meets_all"]))
            for p in peers:
                if "picp95" in m[p]:
                    peer_band.setdefault(p, []).append(0.88 <= m[p]["picp95"] <= 0.99)
    tab = table(["problem", "seed", "RMSE fit()", "RMSE AR1 / NARGP / linked GP", "ratio to best peer",
                 "CPU s fit() / best peer", "CPU ratio", "PICP95 fit()", "PICP95 peers", "CRPS fit()", "CRPS peers",
                 "NLPD fit()", "NLPD peers", "kernel chosen"], rows)

    def share(sel):
        xs = [x for x in shares if sel(x)]
        if not xs:
            return "none"
        return (f"RMSE {sum(x[1] for x in xs)}/{len(xs)}, CPU {sum(x[2] for x in xs)}/{len(xs)}, PICP95 "
                f"{sum(x[3] for x in xs)}/{len(xs)}, all three {sum(x[4] for x in xs)}/{len(xs)}")
    commits = sorted({d.get("snapshot_commit") or d.get("commit", "")[:10] for d in files})
    notes = [para(f"""Target (issue 41): `MultiFidelityEmulator(...).fit()` within 1.1x the RMSE of the best of
        emukit AR1, emukit NARGP and a linked GP, at most 3x that peer's CPU seconds, PICP95 in [0.88, 0.99] (**x**
        marks a miss). RMSE against the noise-free truth and CRPS / NLPD / PICP95 of a new run, in units of the
        highest fidelity's training sd; the peers' columns are AR1 / NARGP / linked GP. A named problem's streams
        (seed: its designs and test points) are rows of their own; a random draw is its own problem (seed 0). Share
        of rows meeting each target: named {share(lambda x: not x[0])}; random draws (seeds not looked at while
        tuning) {share(lambda x: x[0])}. PICP95 in [0.88, 0.99] for the peers on the same rows:
        {", ".join(f"{label[p]} {sum(v)}/{len(v)}" for p, v in peer_band.items())}. Measured at commit(s)
        {', '.join(c[:10] for c in commits)}, one thread.""")]
    notes += [para(d["note"]) for d in files if d.get("note")]
    linked = linked_only[0]["linked"] if linked_only else linked
    if linked:
        def span(m, k, fmt):
            vals = [r["methods"][m][k] for r in linked if m in r["methods"]]
            return f"{fmt.format(min(vals))}-{fmt.format(max(vals))}" if vals else "none"
        met = sum(r["methods"]["emulator"]["sd_over_rmse"] <= 2.0 for r in linked if "emulator" in r["methods"])
        notes.append(para(f"""Three linked deterministic simulators (`linked_simulators`: x -> s1 -> s2 -> s3, 200 runs
            of each, s3 predicted from x, {len(linked)} streams; target: mean predictive sd at most 2x the RMSE): the
            emulator (`connect_input=["s1"]`) RMSE {span("emulator", "rmse", "{:.2g}")}, sd / RMSE
            {span("emulator", "sd_over_rmse", "{:.2f}")}, PICP95 {span("emulator", "picp95", "{:.2f}")}, CPU s
            {span("emulator", "cpu_seconds", "{:.1f}")} (target met on {met} of {len(linked)}); the DAG-DGP's
            default path (`DAGDGP(graph)`, `train(num_steps=3000)`) RMSE {span("dagdgp_default", "rmse", "{:.2g}")},
            sd / RMSE {span("dagdgp_default", "sd_over_rmse", "{:.2f}")}, PICP95
            {span("dagdgp_default", "picp95", "{:.2f}")}, CPU s {span("dagdgp_default", "cpu_seconds", "{:.1f}")}.
            The default path scales each simulator's amplitude and nugget by a leave-one-out factor
            (`pyro_dag.gp.amplitude`; s1 and s2, which feed children, calibrate their latent function); the emulator
            holds a 1e-8 nugget and takes each fidelity's amplitude from cross-validation with refitted
            hyperparameters."""))
    cmd = ("`python benchmarks/multifidelity_auto.py --named --draws ''`, `--draws '' --linked 5 --out "
           "multifidelity_auto_linked`, `--draws 200-211 --out "
           "multifidelity_auto_draws200` and `--named --seeds 2 --seed-start 1 --draws 300-311 --out "
           "multifidelity_auto_heldout`")
    return Section("Does the emulator's default pick a model as good as emukit's and a linked GP's?", cmd, tab, notes,
                   names)


def sec_mf_calibration(R):
    """The emulator's intervals before and after the conformal amplitude factor (issue 41 item 3): ``fit()``'s
    rows of the current multifidelity_auto*.json beside ``mf_calibration_before_*.json`` (``--methods ours`` on an
    archive of the commit before the change, ``reference_commit``)."""
    befores = R.glob("mf_calibration_before_*.json")
    if not befores:
        return None
    before, ref = {}, set()
    for n in befores:
        d = R(n)
        ref.add(d["reference_commit"][:10])
        for r in d["rows"]:
            if "rmse" in r["methods"].get("ours", {}):
                before[(r["problem"], r.get("seed", 0))] = r["methods"]["ours"]
    after = {}
    # the re-runs paired with the "before" ones (the other multifidelity_auto*.json may be from older trees)
    for n in [n for n in ("multifidelity_auto_heldout.json", "multifidelity_auto_draws200.json")
              if n in R.glob("multifidelity_auto*.json")]:
        for r in R(n)["rows"]:
            if "rmse" in r["methods"].get("ours", {}):
                after[(r["problem"], r.get("seed", 0))] = r["methods"]

    def group(key):
        p, seed = key
        if p.startswith("random-3"):
            return "draws 300-311 (never looked at)"
        if p.startswith("random-2"):
            return "draws 200-211 (held out)"
        return f"named, seed {seed}" + (" (tuning stream)" if seed == 0 else "")
    keys = sorted(set(before) & set(after), key=lambda k: (group(k), k))
    rows, stats = [], {}
    band = lambda v: 0.88 <= v <= 0.99  # noqa: E731
    for k in keys:
        b, m = before[k], after[k]
        a = m["ours"]
        mark = "" if band(a["picp95"]) else (" **low**" if a["picp95"] < 0.88 else " **high**")
        rows.append([group(k), k[0], str(k[1]), f"{b['picp95']:.3f}", f"{a['picp95']:.3f}" + mark,
                     f"{b['rmse']:.3g} / {a['rmse']:.3g}", f"{b['crps']:.3g} / {a['crps']:.3g}",
                     f"{b['nlpd']:.2f} / {a['nlpd']:.2f}",
                     f"{a['rmse_ratio']:.2f}" if "rmse_ratio" in a else "n.r.",
                     f"{a['cpu_ratio']:.2f}" if "cpu_ratio" in a else "n.r."])
        g = stats.setdefault(group(k), [])
        g.append((band(b["picp95"]), band(a["picp95"]), b["picp95"] < 0.88, a["picp95"] < 0.88, b["picp95"] > 0.99,
                  a["picp95"] > 0.99, a.get("meets_rmse"), a.get("meets_cpu")))
    tab = table(["rows", "problem", "seed", "PICP95 before", "PICP95 after", "RMSE before / after",
                 "CRPS before / after", "NLPD before / after", "RMSE ratio to best peer (after)",
                 "CPU ratio (after)"], rows)
    lines = []
    for gname, xs in sorted(stats.items()):
        n = len(xs)
        c = [sum(bool(x[i]) for x in xs) for i in range(8)]
        lines.append(f"{gname}: PICP95 in band {c[0]}/{n} -> {c[1]}/{n} (below 0.88 {c[2]} -> {c[3]}, above 0.99 "
                     f"{c[4]} -> {c[5]}); after, RMSE within 1.1x of the best peer {c[6]}/{n}, CPU within 3x {c[7]}/{n}")
    allx = [x for xs in stats.values() for x in xs]
    better = {m: sum(after[k]["ours"][m] < before[k][m] for k in keys) for m in ("nlpd", "crps")}
    total_line = (f"All {len(allx)} rows: PICP95 in band {sum(x[0] for x in allx)} -> {sum(x[1] for x in allx)}, "
                  f"below 0.88 {sum(x[2] for x in allx)} -> {sum(x[3] for x in allx)}, above 0.99 "
                  f"{sum(x[4] for x in allx)} -> {sum(x[5] for x in allx)}; NLPD lower after on {better['nlpd']} rows "
                  f"(mean change {statistics.mean(after[k]['ours']['nlpd'] - before[k]['nlpd'] for k in keys):+.3f}), "
                  f"CRPS lower on {better['crps']}; RMSE unchanged but for the predictive's 200 draws (within 2 %: "
                  "the factor scales variances only).")
    notes = [para(f"""Before: `fit()` at commit {', '.join(sorted(ref))} (each fidelity's variances scaled by the
        mean r²/σ² of its refitted 5-fold cross-validation), re-measured with `--methods ours` on an archive of that
        commit; after: the current tree (the factor is the conformal 95 % quantile of the same held-out runs'
        studentised residuals, `pyro_dag.emulation.selection.coverage_scale`), the rows of the
        `multifidelity_auto*.json` files above, with the peers measured side by side. PICP95 of the highest
        fidelity's test runs; **low** / **high** mark a row below 0.88 / above 0.99. """ + "; ".join(lines) + ". "
                  + total_line),
             para("""Causes measured on the tuning set (named problems stream 0, draws 100-111): the predictive does
        carry the lower fidelity's uncertainty (ancestral sampling; with the parent's mean plugged in instead,
        random-100 covered 21 % against 98 %), and the test points are not outside the designs (their median
        distance to the nearest run is at most the runs' own on 17 of 18 rows). The over-confident rows have
        heavy-tailed errors at the refined fidelity itself (the same coverage with the true parent plugged in;
        test r²/σ² median 0.4-0.55, mean 2.2-3.5): the mean r²/σ² of 14-25 held-out runs misses the tail, the
        conformal quantile less so. The under-confident rows are deterministic with tiny errors: a top fidelity
        with fewer than 30 runs never shrinks (forrester, 14 runs: factor 0.018 not applied; letting 11-29 runs
        shrink made draw 101 cover 71 %), and 5-fold cross-validation, which fits 80 % of the runs, overstates the
        full fit's error on smooth functions (park 3.3x, Branin 2.8x, draw 103 5.4x the factor that would cover
        95 % of the test points). The factor from cross-validation is within 0.6-1.7x of the one that covers 95 %
        of the test points (what a band of [0.88, 0.99] needs of a Gaussian error) on only a minority of rows
        (0.27-8.4x): with 11-25 runs, the estimate's noise is the limit.""")]
    return Section("Are the emulator's 95 % intervals calibrated on draws nobody tuned on?",
                   "`python benchmarks/multifidelity_auto.py --named --seeds 2 --seed-start 1 --draws 300-311 --out "
                   "multifidelity_auto_heldout` and `--draws 200-211 --out multifidelity_auto_draws200`; before: the "
                   "same with `--methods ours` on `git archive <commit>`", tab, notes, befores)


def sec_mf_published(R):
    merged = _mf_merge(R, "multifidelity_published")
    sizes = script_constant("benchmarks/multifidelity.py", "CHAIN_SIZES")
    steps = sorted({R(n)["steps"] for n in R.glob("multifidelity_published*.json")})
    chains = [p for p in merged if p in sizes]

    def wins(fixed):
        out = []
        for p in chains:
            s = merged[p]
            ours = [v["rmse"][0] for m, v in s.items()
                    if "DAG-" in m and (fixed or "noise fixed" not in m) and "rmse" in v]
            emu = min(v["rmse"][0] for m, v in s.items() if m.startswith("emukit") and "rmse" in v)
            if ours and min(ours) <= emu:
                out.append(p)
        return out
    w0, w1 = wins(False), wins(True)
    fixed_notes = [f"{', '.join(R(n)['results']).capitalize()}'s fixed-noise row: {R(n)['note']}"
                   for n in R.glob("multifidelity_published_fixed_*.json") if R(n).get("note")]
    head, prow = _mf_pivot(merged)
    tab = table(head, prow)
    cpu_max = max((v["cpu_seconds"][0], p, m) for p, s in merged.items() for m, v in s.items()
                  if "DAG-" in m and "cpu_seconds" in v)
    graph_ok = ("graphical" in merged and min(v["rmse"][0] for m, v in merged["graphical"].items() if "DAG-" in m)
                < min(v["rmse"][0] for m, v in merged["graphical"].items() if m.startswith("emukit")))
    notes = [para(f"""Perlino et al. 2026, Table 2 analogue: chains with run counts
        {', '.join(f'{k} {"/".join(str(x) for x in v)}' for k, v in sizes.items())} (lowest fidelity first) and the
        graphical problem; pyro_dag {'/'.join(str(s) for s in steps)} joint steps after pretraining. Cells: RMSE /
        CRPS of
        the high fidelity, means over the seeds; bold: best RMSE; the better of a method's variants where it has several
        (the graphical problem's emukit chains use one low fidelity, named). *M = runs, noise fixed*: one inducing
        point per lowest-fidelity run and a small fixed
        nugget (`num_inducing`, `noise`, `learn_noise=False`; see the emulation guide); *NARGP kernel*:
        `kernel="nargp"`. Spreads and seconds are in the JSON; the
        costliest DAG-DGP fit took {cpu_max[0]:.0f} CPU s ({cpu_max[1]}, {cpu_max[2]})."""
                  + "".join(f" {n}." for n in fixed_notes)),
             para(f"""Target: pyro_dag ≤ emukit's best RMSE on at least {TARGETS['mf_chains']} of the {len(chains)}
        chains:
        {len(w0)} with the defaults ({', '.join(w0)}), {len(w1)} counting the fixed-noise rows ({', '.join(w1)}):
        {yes(len(w1) >= TARGETS['mf_chains'])}. On Borehole the lowest fidelity with fewer inducing points than runs is
        far worse than an exact GP and the high fidelity inherits it; on Currin the learned noise and the hyperparameter
        mode found from the data-driven start predict worse. Neither option helps everywhere (they hurt Branin, and
        stochastic simulators need a learned noise), so the defaults stay."""
                  + (" On the graphical problem the DAG-DGPs beat every emukit chain, which can use only one low "
                     "fidelity."
                     if graph_ok else ""))]
    return Section("Multi-fidelity emulation against peers: the published splits",
                   "`python benchmarks/multifidelity.py --problems P --seeds S --suffix _P` per problem (the suffix "
                   "of each results file), then `--readme-only`", tab, notes,
                   R.glob("multifidelity_published*.json"))


def sec_mf_hf_scarce(R):
    merged = {}
    srcs = [n for n in R.glob("multifidelity_hf_scarce*.json") if n not in NOT_REPORTED]
    for n in srcs:
        for prob, r in R(n)["results"].items():
            merged.setdefault(prob, {}).update(r["summary"])
    s = merged["graphical"]
    svi, vi = s["DAG-SVI (MultiFidelity)"], s["DAG-VI (MultiFidelity)"]
    emu = min((v["rmse"][0], m) for m, v in s.items() if m.startswith("emukit"))
    P = PUBLISHED["hf_scarce_rmse"]
    d = R(srcs[-1])
    tab = table(["problem", "method", "RMSE", "N-RMSE", "CRPS", "PICP95 / NLPD", "s / fit", "CPU s / fit", "runs"],
                _mf_rows(merged))
    notes = [para(f"""Perlino et al. 2026, Table 4 protocol on the graphical problem: cross-validation over the
        high-fidelity runs, {d['repeats']} repetitions (runs), the low fidelities keep all theirs; pyro_dag {d['steps']}
        joint steps. Target DAG-SVI ≤ DAG-VI: RMSE {svi['rmse'][0]:.5f} vs {vi['rmse'][0]:.5f}
        ({yes(svi['rmse'][0] <= vi['rmse'][0])}), CRPS {svi['crps'][0]:.5f} vs {vi['crps'][0]:.5f}
        ({yes(svi['crps'][0] <= vi['crps'][0])}): equal within noise, both far below emukit's best ({emu[0]:.3f}). The
        structured guide's coupling acts through the low fidelities' uncertainty at the high fidelity's runs, which is
        tiny for deterministic simulators; the paper's stochastic heavy-ion simulators are our reading of why its gain
        (RMSE {P['DAG-SVI']:.2e} vs {P['DAG-VI']:.2e}) does not appear here (the shorter budget was not ruled out).""")]
    return Section("Multi-fidelity emulation against peers: scarce high-fidelity runs",
                   f"`python benchmarks/multifidelity.py --protocol hf-scarce --problems graphical --repeats "
                   f"{d['repeats']} "
                   "--exclude 'L1→L2→H' --suffix _graphical3`", tab, notes, srcs)


def sec_mf_pooled(R):
    d = R("multifidelity_pooled.json")
    r = d["results"]["graphical"]
    s = r["summary"]
    svi, vi = "DAG-SVI (MultiFidelity)", "DAG-VI (MultiFidelity)"
    folds = r["folds"]

    def lower(k):
        return sum(folds[f][svi][k] <= folds[f][vi][k] for f in folds if k in folds[f].get(svi, {}))
    lowest = all(s[svi][k][0] <= v[k][0] for m, v in s.items() if m != svi for k in ("rmse", "crps") if k in v)
    P = PUBLISHED["pooled_es"]
    tab = table(["problem", "method", "ES_W", "RMSE", "N-RMSE", "CRPS", "PICP95 / NLPD", "s / fit", "CPU s / fit",
                 "folds"],
                _mf_rows({"graphical": s}, with_es=True))
    notes = [para(f"""Perlino et al. 2026, Tables 5-6 protocol on the graphical problem ({' / '.join(str(x) for x in
        d['sizes'])} runs at L1 / L2 / H), folds over every fidelity's runs; ES_W is the weighted energy score of the
        joint predictive of all held-out runs (— without one); RMSE and CRPS on H; pyro_dag {d['steps']} joint steps,
        `{d['inducing_init']}` inducing inputs. Target (DAG-SVI lowest RMSE and CRPS): {yes(lowest)}, narrowly (DAG-SVI
        below DAG-VI on {lower('rmse')} of {len(folds)} folds in RMSE, {lower('crps')} in CRPS,
        {lower('energy_score')} in
        ES_W); the paper also finds them close (ES_W {P['DAG-SVI']} vs {P['DAG-VI']}).""")]
    return Section("Multi-fidelity emulation against peers: the pooled joint protocol",
                   f"`python benchmarks/multifidelity.py --protocol pooled --folds {','.join(sorted(folds, key=int))} "
                   f"--steps {d['steps']}`",
                   tab, notes, ["multifidelity_pooled.json"])


LAMP_METHODS = [("lamp", "LaMP-DGP"), ("dsvi", "DSVI-GPyTorch"), ("dagvi", "DAG-VI"), ("gp", "single GP")]


def sec_lamp(R):
    d = R("lamp_functions.json")
    cells = {}
    for r in d["rows"]:
        cells.setdefault((r["function"], r["noisy"], r["n"]), {}).setdefault(r["method"], []).append(r)
    order = []
    for r in d["rows"]:
        if r["function"] not in order:
            order.append(r["function"])
    means, reps = {}, {}
    for (fn, noisy, n), c in cells.items():
        for m, v in c.items():
            means[(fn, noisy, n, m)] = (mean([x["rmse"] for x in v]), mean([x["seconds"] for x in v]))
            reps.setdefault(n, set()).add(len(v))
    all_ns = sorted({k[2] for k in cells})
    rows = []
    for fn, noisy in sorted({(k[0], k[1]) for k in cells}, key=lambda k: (k[1], order.index(k[0]))):
        row = [fn + (" (noisy)" if noisy else "")]
        for n in all_ns:
            got = [means.get((fn, noisy, n, m)) for m, _ in LAMP_METHODS]
            if got[0] is None:
                row.append("–")
                continue
            best = min(x[0] for x in got if x)
            cell = " / ".join(("–" if x is None else (f"**{x[0]:.3g}**" if x[0] == best else f"{x[0]:.3g}"))
                              for x, (m, _) in zip(got, LAMP_METHODS) if m != "dagvi")
            dv = means.get((fn, noisy, n, "dagvi"))
            row.append(cell + (f" (DAG-VI {dv[0]:.3g})" if dv else ""))
        rows.append(row)
    fns = [f for f in order]

    def wins(n):
        won = [f for f in fns if (f, False, n, "lamp") in means and (f, False, n, "dsvi") in means
               and means[(f, False, n, "lamp")][0] <= means[(f, False, n, "dsvi")][0]]
        ran = [f for f in fns if (f, False, n, "lamp") in means and (f, False, n, "dsvi") in means]
        return won, ran
    tv = []
    for n in TARGETS["lamp_target_ns"]:
        won, ran = wins(n)
        tv.append(f"n = {n}: {len(won)} of {len(ran)} ({yes(len(won) >= TARGETS['lamp_wins'])})")
    gpv = []
    for fn in TARGETS["lamp_gp_functions"]:
        ns = sorted(n for (f_, noisy, n, m) in means if f_ == fn and not noisy and m == "lamp")
        ok = [n for n in ns if (fn, False, n, "gp") in means
              and means[(fn, False, n, "lamp")][0] <= means[(fn, False, n, "gp")][0]]
        gpv.append(f"{fn} at {len(ok)} of {len(ns)} sizes (n = {', '.join(str(n) for n in ok) or 'none'})")
    tn = TARGETS["lamp_time_n"]
    ratios = [x["seconds"] / y["seconds"] for k, c in cells.items() if k[2] <= tn and not k[1]
              for x in c.get("lamp", []) for y in c.get("dsvi", []) if x["rep"] == y["rep"]]
    cpu = [x["cpu_seconds"] / y["cpu_seconds"] for k, c in cells.items() if k[2] <= tn and not k[1]
           for x in c.get("lamp", []) for y in c.get("dsvi", []) if x["rep"] == y["rep"] and x.get("cpu_seconds")
           and y.get("cpu_seconds")]
    # a peer's fit no better than predicting the training mean (RMSE >= 1 on the standardised scale)
    failed = sorted((k[0], k[2], mean([x["rmse"] for x in c["dsvi"]])) for k, c in cells.items()
                    if c.get("dsvi") and mean([x["rmse"] for x in c["dsvi"]]) >= 1)
    failed_text = ("DSVI-GPyTorch's RMSE is at or above the training mean's in "
                   + ", ".join(f"{fn} n = {n} ({v:.2f})" for fn, n, v in failed)
                   + ": failed fits of the peer with the paper's settings (not investigated), so LaMP's wins there are "
                     "no evidence for LaMP. ") if failed else ""
    dagvi_ns = sorted({k[2] for k, c in cells.items() if c.get("dagvi")})
    col = {m: R(f"lamp_functions/collider_{m}.json") for m in ("lamp", "dagvi", "dagsvi")}
    loads = [r["load"] for r in d["rows"] if r.get("load") is not None]
    for row, (fn, noisy) in zip(rows, sorted({(k[0], k[1]) for k in cells}, key=lambda k: (k[1], order.index(k[0])))):
        lamp_rows = [x for (f_, nz, _), c in cells.items() if (f_, nz) == (fn, noisy) for x in c.get("lamp", [])]
        row.append(calib_cell({k: mean([x.get(k) for x in lamp_rows]) if any(x.get(k) is not None for x in lamp_rows)
                               else None for k in ("picp95", "crps", "nlpd")}))
    tab = table(["function"] + [f"n = {n}: LaMP / DSVI / GP" for n in all_ns] + [f"LaMP {CALIB_HEAD} (mean over n)"],
                rows)
    notes = [para(f"""The simulators of Chang & Sung (2026), the same randomised-LHS designs for every method. Cells:
        test
        RMSE of LaMP-DGP / DSVI-GPyTorch / a single GP on the standardised scale against the noise-free response, means
        over the replications run
        ({'; '.join(f'n = {n}: {"/".join(str(r) for r in sorted(reps[n]))}' for n in all_ns)});
        bold: best; DAG-VI ran at n = {', '.join(str(n) for n in dagvi_ns)} only; `–`: not run. CRPS, seconds, epochs
        and
        loads are in the JSON (one thread on a shared machine, load {rng(loads, 1)}). At n = {max(all_ns)} LaMP predicts
        with the Nyström + local-GP approximation and the single GP is sparse. The paper's full grid of replications was
        not run."""),
             para(f"""Targets: LaMP ≤ DSVI-GPyTorch on at least {TARGETS['lamp_wins']} functions at {' and '.join(tv)};
        LaMP ≤ the single GP for {'; '.join(gpv)}; LaMP / DSVI wall-clock ≤ 1 at n ≤ {TARGETS['lamp_time_n']} in
        {sum(x <= 1 for x in ratios)} of {len(ratios)} cells ({yes(all(x <= 1 for x in ratios))}; CPU seconds where
        recorded: {sum(x <= 1 for x in cpu)} of {len(cpu)}). {failed_text}LaMP's objective is degenerate jointly in the
        latent values and length-scales (the log-determinant rewards an over-smooth first layer), so it works only
        through
        the validation-chosen iterate (`best_epoch` in the JSON). Beyond the paper, on the latent collider: held-out
        RMSE
        LaMP {col['lamp']['rmse_held_out']:.3f} ({col['lamp']['seconds']:.0f} s), DAG-VI
        {col['dagvi']['rmse_held_out']:.3f} ({col['dagvi']['seconds']:.0f} s), DAG-SVI
        {col['dagsvi']['rmse_held_out']:.3f}
        ({col['dagsvi']['seconds']:.0f} s).""")]
    return Section("LaMP-DGP against doubly stochastic VI on the simulators of Chang & Sung (2026)",
                   "`python benchmarks/lamp_functions.py` (every method's settings in its docstring)", tab, notes,
                   ["lamp_functions.json"] + [f"lamp_functions/collider_{m}.json" for m in ("lamp", "dagvi", "dagsvi")])


def sec_sem_quadratic(R):
    d = R("sem_quadratic.json")
    rows, svi, nuts = [], [], []
    for seed, r in sorted(d["results"].items(), key=lambda kv: int(kv[0])):
        n = r["nuts"]
        svi.append(r["svi"]["corr_X2_X1sq"])
        nuts.append(n["corr_X2_X1sq"])
        wd = f"{n['warmup']} + {n['samples']}" if "warmup" in n else "earlier run"
        rows.append([seed, f"{r['oracle_corr_X2_X1sq']:.3f}", f"{r['exact_posterior_corr_X2_X1sq']:.3f}",
                     f"{r['svi']['corr_X2_X1sq']:.3f}", f"{n['corr_X2_X1sq']:.3f}", f"{wd} ({n['divergences']})",
                     f"{r['gplvm']['corr_X2_X1sq']:.3f} / {r['gplvm']['corr_best_rotation']:.3f}",
                     f"{r['svi']['seconds']:.0f}", f"{n['seconds']:.0f}"])
    a = d["args"]
    ok = all(x >= TARGETS["sem_corr"] for x in svi + nuts)
    tab = table(["seed", "oracle", "exact posterior", "SVI corr(X2, X1²)", "NUTS corr(X2, X1²)",
                 "NUTS warm-up + draws (divergent)", "GPLVM (axes / best rotation)", "SVI s", "NUTS s"], rows)
    notes = [para(f"""Silva & Gramacy (2010, Sec. 5, Fig. 3): X2 quadratic in X1, indicators for each,
        {a['num_inducing']}
        pseudo-inputs. The statistic: correlation of the posterior-mean X2 with the squared posterior-mean X1;
        *oracle* on
        the true latents; *exact posterior* under the true parameters (the reference). SVI: `sem_guide`, {a['steps']}
        steps; NUTS: one short chain per seed; GPLVM: identified up to rotation (axes / best rotation). Seconds on a
        loaded
        machine. Target ≥ {TARGETS['sem_corr']} with both paths on every seed: {yes(ok)}. Every NUTS chain had
        divergences
        (short single chains; the exact column is the reference). `sem_guide` uses a joint Gaussian per case because a
        factorised guide biases the structural noise upwards.""")]
    return Section("Latent SEMs: does GPSEM-LV recover a quadratic structural equation?",
                   "`python benchmarks/sem_quadratic.py`", tab, notes, ["sem_quadratic.json"])


SEM_METHODS = [("gp", "GPSEM-LV"), ("linear", "linear SEM"), ("quadratic", "quadratic SEM"), ("gplvm", "GPLVM")]


def sec_sem_predictive(R):
    d = R("sem_predictive.json")
    rows, lines = [], []
    for prob, folds in sorted(d["results"].items()):
        fs = sorted(folds, key=int)
        vals = {m: [folds[k][m]["test_loglik"] for k in fs] for m, _ in SEM_METHODS}
        rows.append([prob, ",".join(fs), d["protocol"][prob]["steps"]] + [mse(vals[m]) for m, _ in SEM_METHODS])
        above_lin = sum(g_ > l for g_, l in zip(vals["gp"], vals["linear"]))
        above_q = sum(g_ > q for g_, q in zip(vals["gp"], vals["quadratic"]))
        med = (statistics.median(vals["gp"]), statistics.median(vals["quadratic"]))
        lines.append(f"{prob}: GPSEM-LV above the linear SEM on {above_lin} of {len(fs)} folds and above the quadratic "
                     f"SEM on {above_q} (medians {med[0]:.2f} vs {med[1]:.2f}; worst fold of the quadratic SEM "
                     f"{min(vals['quadratic']):.2f})")
    for row in rows:
        row.append("n.r. / n.r.")
    tab = table(["problem", "folds", "SVI steps"] + [lab for _, lab in SEM_METHODS] + ["GPSEM-LV PICP95 / CRPS"], rows)
    notes = [para("""Silva & Gramacy (2010, Sec. 5, Table 1) at a reduced size: average test log-likelihood per case
        (higher is better), mean ± s.e. over folds, the same folds for every method; test latents integrated out by
        Monte
        Carlo. *housing*: the paper's Boston model; *abalone*: a synthetic Abalone-like problem. """
                  + "; ".join(lines) + "."),
             para("""Target: GPSEM-LV above both baseline SEMs: on Abalone-like its lead over the quadratic SEM is
        carried by
        folds where the quadratic equation extrapolates badly; on Housing it is behind the quadratic SEM on average (no
        cause measured). The GPLVM leads on Housing, as in the paper, and trails on Abalone-like.""")]
    return Section("Latent SEMs: which model predicts held-out indicators best?",
                   "`python benchmarks/sem_predictive.py`", tab, notes, ["sem_predictive.json"])


def sec_sem_mixing(R):
    d = R("sem_mixing.json")
    a = d["args"]
    rows, med = [], {}
    models = ("identified", "dense")
    for lat in sorted(k for k in d["results"]["identified"] if not k.startswith("_")):
        row = [lat]
        for model in models:
            x = d["results"][model][lat]
            med.setdefault(model, []).append(x["median"])
            row.append(f"{x['median']:.3f} / {x['q90']:.3f} / {x['frac_above_1.1']:.2f}")
        rows.append(row)
    runs = {m: d["results"][m]["_run"] for m in ("identified", "dense")}
    tab = table(["latent"] + [f"{m} model: median EPSR / 90 % quantile / fraction > 1.1" for m in models], rows)
    notes = [para(f"""Silva & Gramacy (2010, Figs. 4-5) protocol on a synthetic stand-in for the Consumer data:
        split-EPSR
        of every latent value over the chains, summarised per latent (boxplots: `results/sem_mixing.png`); CPU s per
        iteration identified {runs['identified']['cpu_seconds_per_draw']:.3f}, dense
        {runs['dense']['cpu_seconds_per_draw']:.3f};
        divergences per chain {runs['identified']['divergences_per_chain']} and
        {runs['dense']['divergences_per_chain']}.
        The identified model mixes much better (median EPSR {rng(med['identified'])} against {rng(med['dense'])}), as in
        the paper's Fig. 5, but has not mixed by the usual {TARGETS['epsr']} rule at this length; one chain adapted a
        much
        larger step size ({', '.join(f'{x:.3f}' for x in runs['identified']['step_size_per_chain'])}). Neither model was
        tuned; the paper's longer chains were not run for time.""")]
    return Section("Latent SEMs: does the identified measurement model mix better than the dense one?",
                   f"`python benchmarks/sem_mixing.py --n {a['n']} --chains {a['chains']} --warmup {a['warmup']} "
                   f"--samples {a['samples']} --num-inducing {a['num_inducing']} --max-tree-depth "
                   f"{a['max_tree_depth']}`",
                   tab, notes, ["sem_mixing.json"])


# ----------------------------------------------------------------------------------------------------------------
# Sections: structure learning
# ----------------------------------------------------------------------------------------------------------------
ER_ORDER = ["pyro_dag", "pyro_dag_linear", "pyro_dag_bge", "exact_linear", "exact_bge", "dibs", "ges", "pc"]


def sec_structure_er(R):
    d = R("structure_er.json")
    s = d["settings"]
    runs = d["runs"]
    ps = sorted({int(k.split("-")[0][1:]) for k in runs})
    cells_ = [(p, mech) for p in ps for mech in ("linear", "nonlinear")]
    rows, verdict = [], []
    for m in ER_ORDER:
        row = [m]
        for p, mech in cells_:
            keys = sorted(k for k in runs if k.startswith(f"p{p}-{mech}-"))
            e = [runs[k][m] for k in keys if m in runs[k] and "dag" in runs[k][m]["metrics"]]
            row.append("–" if not e else
                       f"{mse([x['metrics']['dag']['auroc'] for x in e], 1, 100)} / "
                       f"{mean([x['metrics']['dag']['e_shd'] for x in e]):.1f} / {mean([x['time_s'] for x in e]):.0f}"
                       + (f" [{len(e)}]" if len(e) < len(keys) else ""))
        rows.append(row)
    for p in ps:
        for mech in ("linear", "nonlinear"):
            keys = sorted(k for k in runs if k.startswith(f"p{p}-{mech}-"))
            method = "pyro_dag" if mech == "linear" else "pyro_dag_linear"
            both = [runs[k] for k in keys if method in runs[k] and "dibs" in runs[k]]
            if both:
                a = mean([x[method]["metrics"]["dag"]["auroc"] for x in both])
                b = mean([x["dibs"]["metrics"]["dag"]["auroc"] for x in both])
                t = mean([x[method]["time_s"] for x in both]) / mean([x["dibs"]["time_s"] for x in both])
                verdict.append(f"p = {p} {mech}: AUROC {100 * a:.1f} vs DiBS {100 * b:.1f} ({yes(a >= b)}), time "
                               f"{t:.2f}× DiBS ({yes(t <= 1)})")
    cand, cand_p = [], "/".join(sorted({k.split("-")[0][1:] for n in ("er20_cand12.json", "er20_cand12u.json")
                                          for k in R(n)["runs"]}))
    for name in ("er20_cand12.json", "er20_cand12u.json"):
        c = R(name)
        kw = next(iter(next(iter(c["runs"].values())).values()))["info"]["fit_kwargs"]
        parts = []
        for mech in ("linear", "nonlinear"):
            e = [v for k, r in sorted(c["runs"].items()) if f"-{mech}-" in k for v in r.values()]
            if e:
                parts.append(f"{mech} AUROC {100 * mean([x['metrics']['dag']['auroc'] for x in e]):.1f}, E-SHD "
                             f"{mean([x['metrics']['dag']['e_shd'] for x in e]):.1f} "
                             f"({len(e)} seed{'s' if len(e) > 1 else ''})")
        cand.append(f"`{', '.join(f'{k}={v!r}' for k, v in sorted(kw.items()) if k != 'progress')}`: "
                    + ", ".join(parts))
    tab = table(["method"] + [f"p = {p}, {mech}: AUROC % / E-SHD / s" for p, mech in cells_], rows)
    notes = [para(f"""ER DAGs ({s['edges_per_node']:g} edges per node), n = {s['n']}, linear or random-MLP mechanisms,
        standardised, {len(runs) // len(cells_)} seeds per cell (`[k]`: a method with fewer). Cells: DAG-level AUROC
        (mean ±
        s.e.), expected SHD and fit + sampling seconds on one pinned core (Brier, E-F1, AUPRC and the CPDAG level are in
        the JSON).
        `pyro_dag`: `structure.fit` (linear likelihood on linear data, MLP on nonlinear, where `pyro_dag_linear` is the
        misspecified default); `exact_*`: the exact posterior of the same model, so the gap to it is the variational
        approximation's. DiBS: {s['dibs_particles']} particles; GES (BIC) and PC (Fisher-z) scored on DAGs of their
        class. Each run used `fit`'s defaults of its time (recorded in the JSON)."""),
             para(f"""Targets for `fit`'s default likelihood, on the seeds where DiBS ran (AUROC ≥ DiBS, time ≤ DiBS):
        {'; '.join(verdict)}. At p = {cand_p} the restricted exact order score is opt-in: {'; '.join(cand)}.""")]
    return Section("Structure learning against peers: Erdős-Rényi graphs",
                   "`python benchmarks/structure_er.py` (`--methods` selects; results merge into the JSON)", tab, notes,
                   ["structure_er.json", "er20_cand12.json", "er20_cand12u.json"])


SACHS_LABELS = {"pyro_dag": "pyro_dag mlp", "pyro_dag_linear": "pyro_dag linear", "pyro_dag_bge": "pyro_dag bge",
                "pyro_dag_linear_tempered": "pyro_dag linear, tempered", "exact_linear": "exact posterior, linear",
                "exact_bge": "exact posterior, bge", "dibs": "DiBS", "ges": "GES", "pc": "PC"}
SACHS_METRICS = [("brier", 1, 3), ("e_shd_rc2", 1, 2), ("e_f1", 100, 2), ("auroc", 100, 2)]


def sec_structure_sachs(R):
    d = R("structure_sachs.json")
    paper = script_constant("benchmarks/structure_sachs.py", "PAPER_DAG")
    folds = d["runs"]
    rows, targets = [], []
    auroc_t = max(v[6] for v in paper.values())
    f1_t, shd_t = paper["SVI-DAG"][4], paper["SVI-DAG"][2]
    for m in SACHS_LABELS:
        e = [folds[k][m]["cdt18"]["dag"] for k in sorted(folds) if m in folds[k]]
        if not e:
            continue
        t = [folds[k][m]["time_s"] for k in sorted(folds) if m in folds[k]]
        rows.append([f"**{SACHS_LABELS[m]}** (ours)", len(e)] + [mse([x[k] for x in e], dd, sc)
                                                                 for k, sc, dd in SACHS_METRICS] + [mse(t, 1)])
        if m.startswith(("pyro_dag", "exact")):
            a, f1, shd = 100 * mean([x["auroc"] for x in e]), 100 * mean([x["e_f1"] for x in e]), mean(
                [x["e_shd_rc2"] for x in e])
            targets.append(f"{SACHS_LABELS[m]} {a:.1f} / {f1:.1f} / {shd:.1f} ("
                           + "/".join("yes" if ok else "no" for ok in (a > auroc_t, f1 > f1_t, shd <= shd_t,
                                                                       max(t) <= TARGETS["structure_fold_s"])) + ")")
    for k, v in paper.items():
        rows.append([f"{k} (paper)", "–", f"{v[0]:.3f} ± {v[1]:.3f}", f"{v[2]:.2f} ± {v[3]:.2f}",
                     f"{v[4]:.2f} ± {v[5]:.2f}", f"{v[6]:.2f} ± {v[7]:.2f}", ""])
    expl = []
    for name in R.glob("sachs_explore_*.json"):
        x = R(name)
        e = [r[m]["cdt18"]["dag"] for r in x["runs"].values() for m in r]
        kw = next(iter(next(iter(x["runs"].values())).values()))["info"]["fit_kwargs"]
        expl.append(f"`{', '.join(f'{k}={v!r}' for k, v in sorted(kw.items()) if k != 'progress')}`: AUROC "
                    f"{100 * mean([r['auroc'] for r in e]):.1f}, E-F1 {100 * mean([r['e_f1'] for r in e]):.1f}, E-SHD "
                    f"{mean([r['e_shd_rc2'] for r in e]):.1f}")
    sweep = R("structure_sachs_sweep.json")["runs"]
    dense = mean([r["edges"] for r in sweep["ep=1.5,s=1.0"]])
    tab = table(["method", "folds", "Brier ↓", "E-SHD ↓", "E-F1 % ↑", "AUROC % ↑", "time s"], rows)
    notes = [para(f"""SVI-DAG (Zinage 2026, §4.4) protocol: the pooled Sachs data, folds standardised with training
        statistics; DAG level against cdt's graph (the paper's truth), E-SHD counting a reversal as 2 (other levels
        and the consensus
        DAG in the JSON); mean ± s.e. over folds. Paper rows: its Tables 1-2. *tempered*: `fit(likelihood_scale=...)`.
        Two more linear runs: {'; '.join(expl)}."""),
             para(f"""Targets, AUROC / E-F1 / E-SHD (above the best published AUROC {auroc_t:.1f}, above SVI-DAG's E-F1
        {f1_t:.2f}, at most its E-SHD {shd_t:.1f}, every fold within {TARGETS['structure_fold_s']} s; met or not in
        that order):
        {'; '.join(targets)}. With the BGe score the fit is close to the exact
        posterior of its own model, and even the exact posterior misses E-SHD because it puts its mass on dense graphs
        (about {dense:.0f} edges per sample; next section).""")]
    return Section("Structure learning against peers: the Sachs data", "`python benchmarks/structure_sachs.py` "
                   "(`--methods`, `--likelihood` to select)", tab, notes,
                   ["structure_sachs.json", "structure_sachs_sweep.json"] + R.glob("sachs_explore_*.json"))


def sec_structure_sweep(R):
    d = R("structure_sachs_sweep.json")
    paper = script_constant("benchmarks/structure_sachs.py", "PAPER_DAG")
    auroc_t = max(v[6] for v in paper.values())
    f1_t, shd_t = paper["SVI-DAG"][4], paper["SVI-DAG"][2]
    any_met, sparse_auroc, grid = False, [], {}
    for key, r in d["runs"].items():
        ep, s = key.split(",")[0][3:], key.split("=")[2]
        a, f1, shd = (100 * mean([x["auroc"] for x in r]), 100 * mean([x["e_f1"] for x in r]),
                      mean([x["e_shd_rc2"] for x in r]))
        any_met |= a > auroc_t and f1 > f1_t and shd <= shd_t
        if shd <= shd_t:
            sparse_auroc.append(a)
        grid[(ep, s)] = f"{mean([x['edges'] for x in r]):.1f} / {a:.1f} / {f1:.1f} / {shd:.1f}"
    eps = sorted({k[0] for k in grid}, key=lambda x: -float(x))
    ss = sorted({k[1] for k in grid}, key=lambda x: -float(x))
    rows = [[s] + [grid.get((ep, s), "–") for ep in eps] for s in ss]
    tab = table(["likelihood power s"] + [f"expected_parents = {ep}: edges / AUROC % / E-F1 % / E-SHD" for ep in eps],
                rows)
    notes = [para(f"""The exact posterior of `fit`'s BGe model on the Sachs folds (`exact_posterior(...,
        expected_parents=, likelihood_scale=)`), DAG level, E-SHD with reversal cost 2, mean over folds. The previous
        section's targets are met by {'some setting' if any_met else 'no setting'}: every setting sparse enough for
        the E-SHD target ranks edges worse (AUROC ≤ {max(sparse_auroc):.1f}).""" if sparse_auroc else "")]
    return Section("Could a sparser prior or a tempered likelihood meet the Sachs targets?",
                   "`python benchmarks/structure_sachs_sweep.py`", tab, notes, ["structure_sachs_sweep.json"])


def sec_two_node(R):
    d = R("structure_two_node.json")
    paper = script_constant("benchmarks/structure_two_node.py", "PAPER")
    repo = script_constant("benchmarks/structure_two_node.py", "REPO")
    rows = []
    for kind in ("linear", "nonlinear"):
        for prior in ("incorrect", "noninformative", "correct"):
            r = d["runs"].get(f"{kind}-{prior}")
            if r is None:
                continue
            rows.append([kind, prior, f"{100 * r['forward']:.1f}", f"{100 * r['backward']:.1f}",
                         f"{100 * r['none']:.1f}", " / ".join(paper[(kind, prior)]),
                         " / ".join(f"{x:.1f}" for x in repo[(kind, prior)]), f"{r['time_s']:.0f}"])
    tab = table(["data", "prior", "x1→x2 % (ours)", "x1←x2 %", "no edge %", "paper Fig. 3 (→ / ← / none)",
                 "SVI-DAG repository (→ / ← / none)", "time s"], rows)
    notes = [para(f"""SVI-DAG (§4.1, Fig. 3): truth `x1 → x2`, {d['settings']['n']} rows, priors correct, transposed or
        noninformative; fractions of {d['settings']['k']} samples; linear likelihood on linear data, MLP on nonlinear
        (one seed). The paper's bar labels are partly read off the figure and its code does not reproduce them: compare
        the ordering.""")]
    return Section("Does the posterior orient a two-node graph as the data and the prior say?",
                   "`python benchmarks/structure_two_node.py`", tab, notes, ["structure_two_node.json"])


def sec_fit_vs_exact(R):
    d = R("structure_fit_vs_exact.json")
    groups = {}
    for k, r in d["runs"].items():
        groups.setdefault(k.rsplit("-", 1)[0], []).append((k, r))
    names = {"er10-linear": "ER p = 10, linear data, linear likelihood",
             "er10-nonlinear": "ER p = 10, nonlinear data, linear likelihood", "sachs": "Sachs, BGe"}
    rows = []
    for gk in sorted(groups):
        rs = [r for _, r in sorted(groups[gk])]
        for read in ("history", "final"):
            x = [r[read] for r in rs]
            rows.append([f"{names.get(gk, gk)} ({len(rs)} {'folds' if gk == 'sachs' else 'seeds'})", read,
                         f"{mean([v['orders'] for v in x]):.0f}", f"{mean([v['ess'] for v in x]):.1f}",
                         f"{mean([v['order_mass'] for v in x]):.3g}", f"{mean([v['mae'] for v in x]):.3f}",
                         f"{mean([v['max_err'] for v in x]):.3f}", f"{100 * mean([v['auroc'] for v in x]):.1f}",
                         f"{100 * mean([r['exact_auroc'] for r in rs]):.1f}", f"{mean([r['time_s'] for r in rs]):.0f}"])
    tab = table(["problem", "read", "orders", "ESS", "order mass", "mean abs err", "max abs err", "AUROC %",
                 "exact AUROC %", "fit s"], rows)
    notes = [para("""One `fit` per problem with its defaults, read over the orders visited in the last half of the run
        (`history`, the default) or the final ones, both weighted by the exact order score; errors are |P - P_exact|
        over
        edges; order mass is the exact posterior probability of the orders used. The posterior over orders is flat, so
        the final orders hold little of it and the history is what brings `fit` close to exact.""")]
    return Section("How close is `structure.fit` to the exact posterior of its own model?",
                   "`python benchmarks/structure_fit_vs_exact.py`", tab, notes, ["structure_fit_vs_exact.json"])


TRUST_LABEL = {"exact": "exact DP (ceiling), edge prior", "exact_fair": "exact DP (ceiling), fair prior",
               "spn_greedy": "circuit, greedy exact splits", "spn_exact": "circuit on exact order samples",
               "spn_fit": "circuit on `fit`'s orders", "spn_random": "circuit on random splits",
               "spn_greedy_fair": "circuit, greedy exact splits, fair prior",
               "spn_exact_fair": "circuit on exact order samples, fair prior",
               "fit_samples": "`fit` samples, sample-based", "spn_mcmc": "circuit on order-MCMC orders",
               "mcmc_samples": "order-MCMC DAG samples, sample-based",
               "dibs_samples": "DiBS (mixture weights), sample-based"}


def sec_trust(R):
    d16, d32 = R("structure_trust.json"), R("structure_trust_d32.json")
    p12, cand = R("structure_trust_d32_pairwise12.json"), R("structure_trust_d32_candidates.json")
    ns = d16["settings"]["evidence"]
    rows = []
    for d in (d16, d32):
        for m, row in d["summary"].items():
            rows.append([d["settings"]["d"], TRUST_LABEL.get(m, m), row["graphs"]]
                        + [f"{row[str(n)]['mean']:.3f} ± {row[str(n)]['sd']:.3f}" for n in ns]
                        + ["/".join(f"{row[str(n)]['coverage']:.2f}" for n in ns), f"{row['auroc']:.3f}",
                           f"{row['paper_metrics']['mll']:.1f}" if "paper_metrics" in row else "–",
                           f"{row['paper_metrics']['mse_ce']:.4f}" if "paper_metrics" in row else "–"])
        if d is d16:
            for name, vals in d["paper_table2"].items():
                rows.append([d["settings"]["d"], f"paper: {name}", "–"]
                            + [f"{vals[str(n)]:.3f}" if str(n) in vals else "–" for n in ns] + ["", "", "", ""])
    s16 = d16["summary"]
    ours = s16["spn_greedy"]
    tg = d16["paper_table2"]["TRUST-G"]
    vs = "; ".join(f"{n}: {ours[str(n)]['mean']:.3f} vs {tg[str(n)]:.3f} ({yes(ours[str(n)]['mean'] >= tg[str(n)])})"
                   for n in ns)
    top = str(ns[-1])
    samp = s16["fit_samples"][top]["mean"]
    t_exact = [r["time_s"]["exact_posterior_v2"] + r["time_s"]["spn_exact_build"] + r["time_s"]["queries"]["spn_exact"]
               for r in d16["runs"] if "exact_posterior_v2" in r["time_s"]]
    cpu32 = [r["cpu_s"]["total"] for r in d32["runs"]]
    rec = {}
    for r in cand["rows"]:
        rec.setdefault((r["selection"], r["K"]), []).append(r["recall"])
    pair_recall = mean(rec.get(("pairwise", p12["settings"]["candidates"]), [float("nan")]))
    k32 = d32["settings"]["candidates"]
    tab = table(["d", "method", "graphs"] + [f"{n} evidence edges" for n in ns]
                + [f"coverage ({'/'.join(str(n) for n in ns)})", "unconditional AUROC", "held-out MLL",
                   "MSE of causal effects"], rows)
    notes = [para(f"""Wang, Wicker & Kwiatkowska 2022 (ICML), Table 2 and Fig. 2: ER DAGs, BGe, standardised data;
        conditional AUROC of the unspecified pairs given n true edges (mean ± sd over graphs × evidence sets);
        evidence of
        probability 0 falls back to the unconditional probabilities; coverage: evidence sets of nonzero probability.
        *fair prior*: the paper's graph prior, otherwise the library's. At d = {d32['settings']['d']}: candidate parent
        sets of {k32} (recall of the true parents {mean([r['candidate_recall'] for r in d32['runs']]):.2f}; with
        {p12['settings']['candidates']} pairwise candidates, recall {pair_recall:.2f}, the circuit reached only
        {p12['summary']['spn_greedy'][top]['mean']:.3f}) and order-MCMC splits; no exact DP."""),
             para(f"""Targets at d = {d16['settings']['d']}: circuit (greedy splits) vs TRUST-G at {vs}; ≥ the
        sample-based
        estimate at {top} edges ({ours[top]['mean']:.3f} vs {samp:.3f}): {yes(ours[top]['mean'] >= samp)}; end to end ≤
        {TARGETS['trust_minutes_d16']} min ({mean(t_exact):.0f} s per graph):
        {yes(max(t_exact) <= 60 * TARGETS['trust_minutes_d16'])}.
        d = {d32['settings']['d']} ≤ {TARGETS['trust_minutes_d32']} min: {mean(cpu32) / 60:.1f} CPU min per graph
        ({yes(max(cpu32) <= 60 * TARGETS['trust_minutes_d32'])}); there evidence outside the candidate sets falls back
        to
        unconditional probabilities (pass it as `candidate_tables(..., include=evidence)`).""")]
    return Section("Conditional edge queries (TRUST): does the order circuit answer them exactly and fast?",
                   f"`python benchmarks/structure_trust.py --graphs {d16['settings']['graphs']} --repeats "
                   f"{d16['settings']['repeats']} --resume` (d = {d16['settings']['d']}; `--dibs` adds DiBS) and `--d "
                   f"{d32['settings']['d']} --expansion {' '.join(str(x) for x in d32['settings']['expansion'])} "
                   f"--candidates "
                   f"{d32['settings']['candidates']} --graphs {d32['settings']['graphs']} --repeats "
                   f"{d32['settings']['repeats']}`", tab, notes,
                   ["structure_trust.json", "structure_trust_d32.json", "structure_trust_d32_pairwise12.json",
                    "structure_trust_d32_candidates.json"])


# ----------------------------------------------------------------------------------------------------------------
# The document
# ----------------------------------------------------------------------------------------------------------------

# ----------------------------------------------------------------------------------------------------------------
# Sections: defaults judged against the tools a user already has
# ----------------------------------------------------------------------------------------------------------------
def sec_defaults_ab(R):
    d = R("defaults_ab.json")
    rows = []
    for r in d["rows"]:
        prev, new = r["previous_defaults"], r["defaults"]
        rows.append([r["problem"], str(r["n"]), str(r["seed"]), g(r["exact_gp"]["rmse"]),
                     f"{g(prev['rmse'])} ({prev['ratio_to_exact_gp']:.2f}×)", f"{g(new['rmse'])} ({new['ratio_to_exact_gp']:.2f}×)",
                     f"{f(r['exact_gp']['cpu_seconds'], 1)} / {f(prev['cpu_seconds'], 1)} / {f(new['cpu_seconds'], 1)}",
                     "fixed" if new["noise_fixed"] else "learned", calib_cell(new)])
    tab = table(["problem", "n", "seed", "exact GP RMSE", "previous defaults (× exact GP)", "defaults (× exact GP)",
                 "CPU s (exact GP / previous / defaults)", "noise (defaults)", f"defaults {CALIB_HEAD}"], rows)
    ratios = [r["defaults"]["ratio_to_exact_gp"] for r in d["rows"]]
    before = [r["previous_defaults"]["ratio_to_exact_gp"] for r in d["rows"]]
    notes = [para(f"""`x -> y` with `DAGDGP(graph)` and `train(..., num_steps={d["rows"][0]["steps"]})`, RMSE of the
        predictive mean against the noise-free outputs of 1000 test runs, in units of the training outputs' standard
        deviation. Previous defaults: `num_inducing=16, noise="learned", kernel_init="default"`; defaults: every case
        an inducing input up to 64, the noise rule (a pilot exact GP; a fixed nugget on these deterministic
        simulators) and the default kernel started at the pilot's fit. Ratio to the exact GP: previous defaults
        {min(before):.1f}-{max(before):.1f}×, defaults {min(ratios):.2f}-{max(ratios):.2f}×. Target (smooth
        simulators, defaults within 1.5× of the exact GP): {yes(max(ratios) <= 1.5)}; the remaining gap is the
        sparse variational fit with 64 inducing inputs for 200 runs and a stochastic ELBO, where the exact GP
        optimises its marginal likelihood on all runs.""")]
    return Section("Do the defaults come close to a plain exact GP on smooth simulators?",
                   "`python benchmarks/defaults_ab.py`", tab, notes, ["defaults_ab.json"])



def sec_deep_regression(R):
    d = R("deep_regression.json")
    import importlib.util
    spec = importlib.util.spec_from_file_location("deep_regression_bench", os.path.join(HERE, "deep_regression.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    report = d.get("report_seeds", bench.REPORT_SEEDS)
    rows = []
    for e in bench.summary(d["rows"], report):
        tgt = e.get("target")
        share = f"{e['share_meeting']:.0%} (<= {tgt['per_draw']}×)" if tgt else "–"
        verdict = "–"
        if tgt:
            verdict = f"median {yes(e['median_met'])}"
            if tgt.get("worst") is not None:
                verdict += f", worst {yes(e['worst_met'])}"
        rows.append([e["kind"], e["method"], f"{e['draws']} / {e['runs']}", f(e["ratio_median"], 2),
                     f(e["ratio_worst"], 2), share, verdict, f(e["picp95"], 2), g(e["nlpd"]), g(e["crps"]),
                     f(e["cpu_seconds"], 1), f"{e['deep_chosen']:.0%}" if "deep_chosen" in e else "–"])
    tab = table(["kind", "method", "draws / runs", "RMSE / exact GP (median)", "worst", "draws meeting",
                 "target", "PICP95", "NLPD (median)", "CRPS", "CPU s", "deep kept"], rows)
    notes = [para("""Random problems from `pyro_dag.datasets.random_regression` (smooth: GP draws in 1-6 D with 60-200
        Latin-hypercube runs; non-stationary: creases, steps, warped inputs, chirps and bumps in 1-3 D with 100-150
        runs; noise sd 0 or 5 % of the function's sd, drawn per problem), seeds 100-109 of each kind, which were not
        looked at while the defaults were chosen (tuning used seeds 0-9). RMSE of the predictive mean against the
        noise-free function at 1000 uniform test points, in units of the training function's sd; the ratio is per
        draw (median over the optimisation streams) to `ExactGP` with its defaults, then median and worst over draws.
        PICP95, CRPS and NLPD are of a new noisy observation under a Gaussian with the predictive moments.
        `deep`: `DeepRegression()` (`method="linear"`: `x -> h -> y` with `x -> y` and a linear hidden layer
        `h = xA`, fitted exactly from the exact GP and its active subspace, kept only when its log marginal likelihood
        beats the exact GP's by more than Schwarz's penalty); `deep_svi`: `DeepRegression(method="svi")` (the SVI deep
        fit, kept only on a higher ELBO); `chain_default`: the bare chain `x -> h -> y` with `DAGDGP` and `train`
        defaults (3000 steps); `lamp_default`: `LatentMAP` on `x -> w -> y` with a 1-D `w` and every default (the
        exact start, ARD length-scales); `lamp_deep`: `DeepRegression(method="lamp")`. Targets: deep <= 1.2× the
        exact GP on smooth draws (median; worst <= 1.5×), <= 0.8× on non-stationary ones (median); LaMP <= 1.5× on
        smooth ones. CPU seconds of fit + predict, one thread, on a shared 2-core machine.""")]
    streams = {}
    for r in d["rows"]:
        if r["method"] != "exact_gp" and r["seed"] in report:
            streams.setdefault((r["kind"], r["seed"], r["method"]), set()).add(r["stream"])
    per_draw = [len(v) for v in streams.values()] or [0]
    locks = sorted({run.get("bench_lock", "held (flock)") for run in d["runs"]})
    loads = [run["load"][0] for run in d["runs"] if run.get("load")]
    # rows of DeepRegression(method="linear") (they record its evidence; earlier `deep` rows were the SVI fit)
    deep = [r for r in d["rows"] if r["method"] == "deep" and r["seed"] in report and "rmse" in r
            and r.get("info", {}).get("evidence")]
    notes.append(para(f"""Runs: {len(d["runs"])} chunks, load average {min(loads):.1f}-{max(loads):.1f} at their
        start; benchmark lock: {"; ".join(locks)}. A stochastic method has {min(per_draw)}-{max(per_draw)}
        optimisation streams per draw of the 5 planned (`draws / runs` above); the exact GP is deterministic (one run
        per draw)."""))
    if deep:
        rat = {k: bench.ratios(d["rows"], "deep", k) for k in ("smooth", "nonstationary")}
        fam = {}
        for r in deep:
            if r["kind"] == "nonstationary" and r["stream"] == 0:
                fam.setdefault((r["family"], r["d"]), []).append(rat["nonstationary"].get(r["seed"]))
        by_family = "; ".join(f"{f} {dim}-D: " + ", ".join(f"{v:.2f}" for v in sorted(vs) if v is not None)
                              for (f, dim), vs in sorted(fam.items()))
        kept = {k: sum(r["info"]["choice"] == "deep" for r in deep if r["kind"] == k) for k in rat}
        runs = {k: sum(r["kind"] == k for r in deep) for k in rat}
        one_d = [v for s_, v in rat["nonstationary"].items()
                 if any(r["seed"] == s_ and r["d"] == 1 and r["kind"] == "nonstationary" for r in deep)]
        notes.append(para(f"""`deep` kept the deep fit in {kept["smooth"]} of {runs["smooth"]} runs on smooth draws
            and {kept["nonstationary"]} of {runs["nonstationary"]} on non-stationary ones. Its ratio to the exact GP
            per non-stationary draw, by family and dimension: {by_family}. A linear hidden layer gains where the
            function varies along a direction that is not an axis (creases and steps in 2-3 D); on the
            {len(one_d)} one-dimensional draws the projection is the input itself, so it cannot gain
            (ratios {", ".join(f"{v:.2f}" for v in sorted(one_d))})."""))
    svi = [r for r in d["rows"] if r["method"] == "deep_svi" and r["seed"] in report and "rmse" in r]
    if svi:
        lower = sum(r["info"]["elbo"]["deep"] < r["info"]["elbo"]["shallow"] for r in svi)
        gaps = [r["info"]["elbo"]["shallow"] - r["info"]["elbo"]["deep"] for r in svi]
        notes.append(para(f"""`deep_svi`: of {len(svi)} runs, {sum(r["info"]["choice"] == "deep" for r in svi)} kept
            the deep fit; in {lower} the deep ELBO ended below the exact GP's log marginal likelihood (by
            {min(gaps):.2g} to {max(gaps):.2g} nats): the bound's slack (the KL of `q(V_h)`) and `train`'s restart of
            `h` from the pilot cost more than depth gains, so the nested exact GP is returned."""))
    return Section("Deep regression: does the deep model nest, and beat, the exact GP?",
                   "`python benchmarks/deep_regression.py` (in chunks: `--kind`, `--seeds`, `--methods`)", tab,
                   notes, ["deep_regression.json"])


def sec_structure_priors(R):
    d = R("structure_priors.json")
    rows = []
    for r in d["summary"]:
        rows.append([r["family"], str(r["n"]), r["variant"], str(r["seeds"]), f(r["mean_shd"], 2), f(r["max_shd"], 0),
                     str(r["seeds_over_target"]), f(100 * r["mean_auroc"], 1), f(r["mean_cpu_s"], 3)])
    tab = table(["graphs", "n", "score / prior", "seeds", "mean CPDAG SHD", "max", "seeds over SHD 1", "AUROC %",
                 "CPU s"], rows)
    met = d["target_met"]
    notes = [para(f"""The exact posterior's MAP CPDAG on linear-Gaussian data (weights |w| in [0.5, 2], random
        signs, N(0, 1) noise, standardised) on the ASIA structure and random ER graphs, for the linear score with
        several noise and weight priors and for BGe. `linear` is the default (a Jeffreys noise prior and weight
        variance s² = n); `linear_unit` the earlier InvGamma(1, 1) with s = 1. Target (ASIA, n >= 500, every seed
        within SHD 1): {", ".join(f"{k} {yes(v)}" for k, v in met.items())}.""")]
    return Section("Which score and noise prior should the exact posterior use on linear-Gaussian data?",
                   "`python benchmarks/structure_priors.py`", tab, notes, ["structure_priors.json"])


def sec_structure_networks(R):
    d = R("structure_networks.json")
    rows = []
    for r in d["summary"]:
        auroc = f(100 * r["mean_auroc"], 1) if r.get("mean_auroc") is not None else "–"
        rows.append([r["network"], str(r["n"]), r["method"], str(r["seeds"]), f(r["mean_shd"], 1), f(r["max_shd"], 0),
                     auroc, f(r["mean_cpu_s"], 1)])
    tab = table(["network", "n", "method", "seeds", "mean CPDAG SHD", "max", "edge AUROC %", "CPU s"], rows)
    met = d["targets_met"]
    notes = [para(f"""Linear-Gaussian data on the CHILD (20 nodes) and ALARM (37 nodes) structures ({d["settings"]["weights"]}),
        one thread. `hybrid`: `structure.hybrid_posterior` (a PC-stable skeleton and Markov-blanket candidates with an
        expansion step, then order MCMC over the candidate tables; Kuipers, Suter & Moffa 2022), its MAP DAG's CPDAG;
        `pc`: {d["settings"]["pc"]}; `ges`: {d["settings"]["ges"]}. Targets (ALARM-size graphs): the point estimate's
        CPDAG SHD at or below PC's on every seed {yes(met["shd_at_or_below_pc_every_seed"])}, edge AUROC >= 0.95
        {yes(met["auroc_every_seed"])}, at most 120 CPU s {yes(met["cpu_every_seed"])}.""")]
    return Section("Does structure learning scale to ALARM-size networks, against PC and GES?",
                   "`python benchmarks/structure_networks.py`", tab, notes, ["structure_networks.json"])


ZOO_ORDER = ["default", "default_mf", "default_deep", "exact_mf", "best", "exact_gp", "linear", "mean", "gpytorch_dgp", "emukit_ar1", "emukit_nargp"]


STRUCTURE_GP_LABELS = {"gp": "GP score (ours, ½ log N per length-scale)", "gp_ml2": "GP score without the ½ log N charge",
                       "bge": "BGe", "bge_k2": "BGe, at most 2 parents", "linear": "linear-Gaussian score"}


def sec_structure_gp(R):
    d = R("structure_gp.json")
    st = d["settings"]
    rows = [[STRUCTURE_GP_LABELS.get(r["method"], r["method"]), str(r["seeds"]), f(r["mean_shd"], 1), f(r["max_shd"], 0),
             f(r["mean_auroc"]), f(r["mean_skeleton_auroc"]), f(r["mean_cpu_s"], 2)] for r in d["summary"]]
    tab = table(["score", "seeds", "MAP CPDAG SHD (mean)", "max", "edge AUROC", "skeleton AUROC", "CPU s / data set"],
                rows)
    notes = [para(f"""Exact posteriors (`exact_posterior(..., likelihood=...)`, at most {st["max_parents"]} parents) on
        Erdős-Rényi graphs with p = {st["p"]}, {st["num_edges"]} edges, GP mechanisms ({st["mechanism"]}), noise
        scale {st["noise_scale"]}, n = {st["n"]}, standardised, {len(st["seeds"])} seeds, one thread. The GP score is
        each family's type-II maximum likelihood ({st["gp"]}) with ½ log N charged per length-scale; its CPU time is
        that of the GP fits. Without the ½ log N charge (the same GP fits re-scored, hence its CPU time) the MAP adds
        edges. `fit(X, likelihood="gp")` computes this posterior (next section).""")]
    return Section("Does a GP score find nonlinear structure that BGe misses?", "`python benchmarks/structure_gp.py`",
                   tab, notes, ["structure_gp.json"])


GP_PEER_LABELS = {"gp": "GP score, `fit(likelihood=\"gp\")` (ours)",
                  "gp_cap2": "GP score, at most 2 parents (ours)", "bge": "BGe, exact (ours)",
                  "dibs": "DiBS, nonlinear", "ges_marginal": "GES, generalised score", "ges_bic": "GES, BIC",
                  "pc": "PC, Fisher-z"}


def sec_structure_gp_peers(R):
    d = R("structure_gp_peers.json")
    by = {}
    for r in d["runs"]:
        by.setdefault((r["mechanism"], r["method"]), []).append(r)
    mechs = [m for m in ("gp", "mlp", "linear") if any(k[0] == m for k in by)]
    rows = []
    for meth in GP_PEER_LABELS:
        cells = []
        for mech in mechs:
            rs = by.get((mech, meth))
            cells.append("–" if not rs else f"{mean([r['auroc'] for r in rs]):.3f} / {mean([r['shd'] for r in rs]):.1f}"
                         f" / {mean([r['cpu_s'] for r in rs]):.0f} ({len(rs)})")
        if any(c != "–" for c in cells):
            rows.append([GP_PEER_LABELS[meth]] + cells)
    tab = table(["method"] + [f"{m} mechanisms: AUROC / SHD / CPU s (seeds)" for m in mechs], rows)

    def paired(mech, other):
        """Mean AUROC of the GP score minus ``other``'s over the seeds both ran."""
        a = {r["seed"]: r["auroc"] for r in by.get((mech, "gp"), [])}
        b = {r["seed"]: r["auroc"] for r in by.get((mech, other), [])}
        common = sorted(set(a) & set(b))
        return (mean([a[k] - b[k] for k in common]), len(common)) if common else (None, 0)

    checks = []
    for mech in ("gp", "mlp"):
        gap, k = paired(mech, "bge")
        if gap is not None:
            checks.append(f"{mech} mechanisms, GP score minus BGe {gap:+.3f} over {k} seeds "
                          f"({'met' if gap >= 0.1 else '**missed**'})")
        for peer in ("dibs", "ges_marginal", "ges_bic", "pc"):
            gap, k = paired(mech, peer)
            if gap is not None:
                checks.append(f"{mech}, minus {GP_PEER_LABELS[peer]} {gap:+.3f} ({k} seeds, "
                              f"{'met' if gap > 0 else '**missed**'})")
    gap, k = paired("linear", "bge")
    if gap is not None:
        checks.append(f"linear data, GP score minus BGe {gap:+.3f} over {k} seeds ("
                      f"{'met' if gap >= -0.02 else '**missed**'})")
    gp_cpu = [r["cpu_s"] for r in d["runs"] if r["method"] == "gp"]
    notes = [para(f"""Erdős-Rényi graphs, p = 10 nodes and 10 edges, n = 200, noise scale 0.5, standardised; GP draws
        of RBF kernels of the parents (5 seeds) and linear mechanisms (3 seeds); the script's tanh-network data sets
        were not run this time. Cells: DAG-level edge AUROC of the
        posterior edge marginals (a point estimator's CPDAG spread over its DAGs), CPDAG SHD of the point estimate (the
        posterior's MAP DAG), CPU seconds per data set, one thread; mean over the seeds in brackets. DiBS (JointDiBS
        with its dense nonlinear Gaussian model, 20 particles, 1000 steps) had not finished one data set after 22 CPU
        minutes on this shared machine and was stopped (`--dibs` runs it); on nonlinear ER data with p = 10 and
        n = 1000 it reached AUROC 67.8 % (the first section of this part). *At most 2 parents*: the GP score's earlier default, on data whose true in-degree is 3-4 on four seeds
        of five. GES with the generalised score: causal-learn's `local_score_marginal_general` (Huang et al. 2018) with
        parent sets up to 2; causal-learn warns of invalid values in its kernel computations on these data, and its
        result is reported as it comes."""),
             para("Targets (AUROC, paired over the seeds both methods ran): " + "; ".join(checks) +
                  f". The exact GP-score posterior took at most {max(gp_cpu):.0f} CPU s per data set (target 600 s: "
                  f"{'met' if max(gp_cpu) <= 600 else '**missed**'}).")]
    return Section("Gaussian-process networks against their peers (BGe, DiBS, GES, PC)",
                   "`python benchmarks/structure_gp_peers.py`", tab, notes, ["structure_gp_peers.json"])


def sec_structure_gp_sachs(R):
    d = R("structure_gp_sachs.json")
    rows = []
    for r in d["runs"]:
        c, t = r["consensus"], r["cdt"]
        rows.append([GP_PEER_LABELS.get(r["method"], r["method"] + " (ours)" if r["method"] == "linear" else r["method"]),
                     f(c["auroc"]), f(c["e_shd"], 1), f(c["shd"], 0), f(t["auroc"]), f(t["e_shd"], 1),
                     f(r["mean_edges"], 1), f(r["cpu_s"], 0)])
    tab = table(["method", "AUROC (consensus)", "E-SHD", "SHD of the point estimate", "AUROC (cdt)", "E-SHD (cdt)",
                 "edges per sample", "CPU s"], rows)
    runs = {r["method"]: r for r in d["runs"]}
    checks = []
    if "gp" in runs:
        peers = [m for m in ("bge", "dibs", "ges_bic") if m in runs]
        best_auroc = max(runs[m]["consensus"]["auroc"] for m in peers)
        best_eshd = min(runs[m]["consensus"]["e_shd"] for m in peers)
        g = runs["gp"]["consensus"]
        checks.append(f"GP score AUROC {g['auroc']:.3f} against the best of {', '.join(peers)} {best_auroc:.3f} "
                      f"({'met' if g['auroc'] >= best_auroc else '**missed**'}); E-SHD {g['e_shd']:.1f} against "
                      f"{best_eshd:.1f} ({'met' if g['e_shd'] <= best_eshd else '**missed**'})")
    notes = [para(f"""Sachs et al. (2005), the 853 rows of the general stimulation (cd3cd28, no intervention),
        log-transformed and standardised; truth: the consensus graph (17 edges) and cdt's (18 edges, the SVI-DAG
        paper's). DAG level, reversal counted once. `gp` is `fit(X, likelihood="gp")`: the exact posterior over
        parent sets of at most 2, each family scored by the collapsed bound with 128 inducing rows (above 400 rows the
        exact evidence costs too much): {runs["gp"]["cpu_s"] / 60 if "gp" in runs else 0:.0f} CPU minutes. One data set
        and one seed per method; DiBS was not run (its cost, previous section). causal-learn's GES with the generalised score is not run (its exact kernel
        computations scale as n³: about an hour here)."""), para("Target (E-SHD and AUROC at least as good as the "
                                                               "best of BGe, DiBS and GES): " + "; ".join(checks) + ".")]
    return Section("Gaussian-process networks on Sachs' observational data",
                   "`python benchmarks/structure_gp_sachs.py`", tab, notes, ["structure_gp_sachs.json"])


def sec_structure_networks_fit(R):
    d = R("structure_networks_fit.json")
    st = d["settings"]
    rows = [[r["network"], str(r["n"]), r["method"], str(r["seeds"]), f(r["mean_shd"], 1),
             f(r.get("mean_auroc")) if r.get("mean_auroc") is not None else "–",
             f(r.get("mean_skeleton_auroc")) if r.get("mean_skeleton_auroc") is not None else "–",
             f(r["mean_cpu_s"], 1)] for r in d["summary"]]
    tab = table(["network", "n", "method", "seeds", "SHD", "edge AUROC", "skeleton AUROC", "CPU s"], rows)
    notes = [para(f"""`structure.fit`'s defaults as they were at this run (SVI-DAG; since issue 43 `fit(X)` without
        SVI-DAG settings computes the hybrid posterior on graphs of this size, and `fit(X, method="svi")` is this
        row) against `hybrid_posterior` and PC ({st["pc"]}) on linear
        Gaussian data from the CHILD and ALARM graphs ({st["weights"]}), n = {", ".join(map(str, st["ns"]))}, seed
        {", ".join(map(str, st["seeds"]))}, one thread. The variational fit finds the skeleton (AUROC above 0.97) but
        not the orientations on these sizes, and costs minutes; the hybrid (PC-stable skeleton, Markov-blanket
        candidates, exact or order-MCMC posterior) recovers both graphs exactly in seconds: for networks of this
        size, use `hybrid_posterior`. One seed: the multi-seed comparison with GES is the section above.""")]
    sources = ["structure_networks_fit.json"]
    if os.path.exists(os.path.join(R.folder, "structure_networks_fit_auto.json")):
        a = R("structure_networks_fit_auto.json")
        sources.append("structure_networks_fit_auto.json")
        auto = [f"{r['network']} (n = {r['n']}) {r['method']}: SHD {f(r['mean_shd'], 1)}"
                + (f", edge AUROC {f(r['mean_auroc'])}" if r.get("mean_auroc") is not None else "")
                + f", {f(r['mean_cpu_s'], 1)} CPU s" for r in a["summary"]]
        chosen = sorted({str(x.get("fit_method")) for x in a["runs"] if x.get("fit_method")})
        notes.append(para(f"""`structure.fit(X)` with no options on the current code (`python
            benchmarks/structure_networks.py --networks alarm --ns 2000 --seeds 1 --methods fit pc --out
            structure_networks_fit_auto.json`, under the shared lock{(", method chosen: " + ", ".join(chosen))
            if chosen else ""}): {"; ".join(auto)}. Issue 43's target (ALARM, n = 2000: SHD at most PC's in at most
            120 CPU s). Load average {", ".join(f"{x:.1f}" for x in a.get("load", []))}. {code_note([a])}"""))
    return Section("How does `structure.fit` do on CHILD and ALARM, against the hybrid posterior and PC?",
                   "`python benchmarks/structure_networks.py --ns 2000 --seeds 1 --methods fit hybrid pc --out "
                   "structure_networks_fit.json`", tab, notes, sources)


#: The band a 95 % interval's coverage should fall in (issue 41, item 4; ``zoo.PICP_BAND``).
PICP_BAND = script_constant("benchmarks/zoo_targets.py", "PICP_BAND")


def picp_cell(values):
    """PICP95 (mean over seeds) with a flag outside ``PICP_BAND``; "not recorded" when the rows lack it."""
    values = [v for v in values if v is not None]
    if not values:
        return "not recorded"
    c = mean(values)
    return f"{c:.2f}" + ("" if PICP_BAND[0] <= c <= PICP_BAND[1] else " **(outside)**")


def calib_cell(r, picp=("picp95", "picp"), crps=("crps", "crps_test", "crps_held_out"),
               nlpd=("nlpd", "nlpd_test", "nlpd_held_out")):
    """'PICP95 / CRPS / NLPD' of a result dict (the first key of each tuple that it holds; "n.r." for a score the
    JSON did not record; ``None``: leave that score out, the table shows it elsewhere): the calibration columns that
    issue 41 puts beside every RMSE."""
    def first(keys, fmt):
        for k in keys:
            v = r.get(k) if isinstance(r, dict) else None
            if isinstance(v, (list, tuple)) and v:
                v = v[0]
            if isinstance(v, (int, float)):
                return fmt(v)
        return "n.r."
    parts = [(picp, lambda v: f"{v:.2f}"), (crps, g), (nlpd, g)]
    return " / ".join(first(keys, fmt) for keys, fmt in parts if keys is not None)


CALIB_HEAD = "PICP95 / CRPS / NLPD"
CALIB_NOTE = ("*PICP95 / CRPS / NLPD*: coverage of the central 95 % predictive interval, CRPS and NLPD of the held-out "
              "observations beside the RMSE (issue 41); *n.r.*: not recorded by the JSON of this run (re-running the "
              "benchmark records what its script computes).")


def sec_zoo(R):
    d = R("zoo.json")
    tree = current_tree_for_report()
    rows_by = {}
    for r in d["rows"]:
        if r.get("error") is None and r.get("rmse") is not None:
            rows_by.setdefault(r["problem"], {}).setdefault(r["method"], []).append(r)
    methods = [m for m in ZOO_ORDER if any(m in v for v in rows_by.values())]
    current = {m for m in methods if all(r.get("code_tree") == tree for v in rows_by.values() for r in v.get(m, []))}
    rows, ratios = [], {}
    for p, info in d["problems"].items():
        if p not in rows_by:
            continue
        by = rows_by[p]
        cells = [g(mean([r["rmse"] for r in by[m]])) if m in by else "–" for m in methods]
        ratio = "–"
        if "default" in by and "exact_gp" in by:
            x = mean([r["rmse"] for r in by["default"]]) / mean([r["rmse"] for r in by["exact_gp"]])
            ratios[p] = (info["kind"], x)
            ratio = f"{x:.2f}"
        seeds = len({r["seed"] for m in by for r in by[m]})
        cpu = f(mean([r["cpu_seconds"] for r in by["default"]]), 1) if "default" in by else "–"
        dfl = by.get("default", [])
        calib = [picp_cell([r.get("picp95") for r in dfl]) if dfl else "–",
                 g(mean([r.get("crps") for r in dfl])) if dfl else "–",
                 g(mean([r.get("nlpd") for r in dfl])) if dfl else "–"]
        rows.append([p, info["kind"], str(seeds)] + cells + [ratio] + calib + [cpu])
    heads = [m if m in current else f"{m} †" for m in methods]
    tab = table(["problem", "kind", "seeds"] + heads + ["default / exact GP", "default PICP95", "default CRPS",
                                                          "default NLPD", "default CPU s"], rows)
    picps = [mean([r.get("picp95") for r in v["default"]]) for v in rows_by.values()
             if "default" in v and any(r.get("picp95") is not None for r in v["default"])]
    smooth = [x for k, x in ratios.values() if k == "smooth"]
    rough = sorted(x for k, x in ratios.values() if k == "nonsmooth")

    def avg(p, m, key="rmse"):
        rs = rows_by.get(p, {}).get(m)
        return mean([r[key] for r in rs]) if rs else None

    targets = []
    if smooth:
        targets.append(f"smooth simulators, default within 1.5× of the exact GP on every one: {yes(max(smooth) <= 1.5)} "
                       f"(worst {max(smooth):.2f}×)")
    if rough:
        med = rough[len(rough) // 2]
        targets.append(f"non-smooth ones, 0.8× on the median: {yes(med <= 0.8)} (median {med:.2f}×; with the DAG "
                       "`x → y` the default model is an exact GP fitted exactly, so it matches it; a deep model must "
                       "have a hidden node: `default_deep`)")
    col = rows_by.get("collider", {})
    if "default" in col:
        truth = d["problems"]["collider"]["noise_truth"]["w3"]
        worst = max(r["rmse"] for r in col["default"])
        factor = max(max(r["noise_variances"]["w3"] / truth, truth / r["noise_variances"]["w3"]) for r in col["default"])
        targets.append(f"collider with default kernels, held-out RMSE ≤ 0.1 on every seed: {yes(worst <= 0.1)} "
                       f"(worst {worst:.3f}), fitted noise within 10× the truth: {yes(factor <= 10)} (worst factor "
                       f"{factor:.1f})")
    latent = [p for p, info in d["problems"].items() if info["kind"] == "latent" and "default_mf" in rows_by.get(p, {})
              and "mean" in rows_by[p]]
    if latent:
        ok = all(avg(p, "default_mf") <= avg(p, "mean") for p in latent)
        targets.append("mean field never worse than the training mean on the latent DAGs"
                       + ("" if "default_mf" in current else " †") + ": " + yes(ok) + " (" +
                       ", ".join(f"{p} {avg(p, 'default_mf'):.3g} vs {avg(p, 'mean'):.3g}" for p in latent) + ")")
    deep = {p: avg(p, "default_deep") / avg(p, "exact_gp") for p in rows_by
            if "default_deep" in rows_by[p] and "exact_gp" in rows_by[p]}
    if deep:
        targets.append("a deep model nests the shallow one (`default_deep`: the DAG `x → h → y`, defaults, at most 1.5× "
                       f"the exact GP on `x → y`){'' if 'default_deep' in current else ' †'}: "
                       f"{yes(max(deep.values()) <= 1.5)} (" +
                       ", ".join(f"{p} {x:.2f}×" for p, x in deep.items()) + ")")
    mf = [p for p, info in d["problems"].items() if info["kind"] == "multifidelity" and p in rows_by
          and "emukit_ar1" in rows_by[p] and "emukit_nargp" in rows_by[p]]
    for m, label in (("default", "the emulator's default (`fit()`)"), ("exact_mf", "`fit(method=\"exact\")`")):
        cells = []
        met = True
        for p in mf:
            if m not in rows_by[p]:
                continue
            peer = min(("emukit_ar1", "emukit_nargp"), key=lambda k: avg(p, k))
            acc, cpu = avg(p, m) / avg(p, peer), avg(p, m, "cpu_seconds") / avg(p, peer, "cpu_seconds")
            met = met and acc <= 1.1 and cpu <= 3
            cells.append(f"{p} {acc:.2f}× at {cpu:.1f}× the CPU of {peer}")
        if cells:
            targets.append(f"multi-fidelity, {label} ≤ 1.1× the best of emukit AR1 / NARGP at ≤ 3× its CPU seconds: "
                           f"{yes(met)} ({'; '.join(cells)})")
    tab_rows = [p for p, info in d["problems"].items() if info["kind"] == "tabular" and "default" in rows_by.get(p, {})]
    for p in tab_rows:
        best = min(avg(p, k) for k in ("exact_gp", "linear") if k in rows_by[p])
        old = any(r.get("code_tree") != tree for m in ("default", "exact_gp", "linear") for r in rows_by[p].get(m, []))
        targets.append(f"{p}: the default (prediction from the roots) at or below the best of exact GP / linear on the "
                       f"same columns{' †' if old else ''}: {yes(avg(p, 'default') <= best)} ({avg(p, 'default'):.3g} vs {best:.3g}; "
                       "`pyro-dag fit --csv` prints a BaselineWarning when it is not)")
    row_picps, outside = [], []
    for r in d["rows"]:
        if r["method"] == "default" and not r.get("error") and r.get("picp95") is not None:
            row_picps.append(r["picp95"])
            if not PICP_BAND[0] <= r["picp95"] <= PICP_BAND[1]:
                outside.append(f"{r['problem']} seed {r['seed']} {r['picp95']:.3f}")
    notes = [para(f"""Held-out RMSE (mean over seeds) in each problem's scoring units (simulators and tabular data:
        standardised with the training targets; the collider in the data's units), against the noise-free truth where
        the problem has one. `default`: the documented path (`DAGDGP(graph)`, `AutoStructuredGuide(model)`,
        `train(..., num_steps)`, `predict`); `default_mf`: the same with a mean-field guide; `default_deep`: the
        problem's DAG with a hidden node between the roots and the target; `exact_mf`: the emulator's exact fit;
        `best`: the best configuration found (its settings are in the JSON); `exact_gp`: ARD RBF, type-II maximum
        likelihood on the roots; `linear`: least squares on the roots; `mean`: the training mean; peers where they
        apply. The settings of every method and the fitted noise variances are in the JSON. Problems without rows
        did not run in this stop (the JSON's rows say which seeds and methods ran)."""),
             para("Targets (issue 33): " + "; ".join(targets) + "."),
             para(f"""Calibration (issue 41): PICP95 is the share of held-out observations inside the central 95 %
        predictive interval (from the predictive CDF at each observation: for `default`, the mixture over its
        predictive samples), flagged **(outside)** when it leaves [{PICP_BAND[0]}, {PICP_BAND[1]}]; CRPS and NLPD are
        of the predictive of a new observation. The default's PICP95 is inside the band on
        {sum(PICP_BAND[0] <= c <= PICP_BAND[1] for c in picps)} of {len(picps)} problems (seeds pooled) and on
        {sum(PICP_BAND[0] <= c <= PICP_BAND[1] for c in row_picps)} of {len(row_picps)} rows (problem × seed; target:
        at least 90 % of the rows; outside: {', '.join(outside) or 'none'}); every method's PICP95, CRPS, NLPD and mean predictive sd are in the JSON
        (`python benchmarks/zoo.py --table` prints them per problem). † a method whose rows were not all measured on
        the current library tree (older runs kept by `--resume`: stale or without a record; each row's `code_tree`
        says which)."""),
             ]
    return Section("How do the defaults do on problems the library was not tuned to (the problem zoo)?",
                   "`python benchmarks/zoo.py`", tab, notes, ["zoo.json"])


def sec_amplitude_rule(R):
    """The deterministic nodes' amplitude rule before this release against the default (amplitude_rule.py)."""
    if not R.glob("amplitude_rule.json"):
        return None
    d = R("amplitude_rule.json")
    groups = {}
    for r in d["rows"]:
        if r.get("error") or r.get("rmse") is None or not r["deterministic"]:
            continue
        group = "linked simulators, s3 from x" if r["problem"] == "linked3" else r["problem"].split("-")[1]
        groups.setdefault((group, r["rule"]), []).append(r)
    rows = []
    for (group, rule), rs in sorted(groups.items()):
        ratio = [r["mean_sd"] / r["rmse"] for r in rs]
        rows.append([group, rule, len(rs), sum(PICP_BAND[0] <= r["picp95"] <= PICP_BAND[1] for r in rs),
                     sum(r["picp95"] > PICP_BAND[1] for r in rs), sum(r["picp95"] < PICP_BAND[0] for r in rs),
                     rng([r["picp95"] for r in rs], 2), sum(x > 2 for x in ratio), f(statistics.median(ratio), 2),
                     f(mean([r["nlpd"] for r in rs if r.get("nlpd") is not None]), 3)
                     if any(r.get("nlpd") is not None for r in rs) else "–"])
    tab = table(["problems (noise-free)", "rule", "rows", f"PICP95 in [{PICP_BAND[0]}, {PICP_BAND[1]}]", "above",
                 "below", "PICP95 range", "sd / RMSE > 2", "median sd / RMSE", "mean NLPD"], rows)
    rules = d["rules"]
    notes = [para(f"""A node that the noise rule holds deterministic (a fixed nugget, the default kernel) has its
        kernel amplitude and nugget scaled by a leave-one-out factor after its exact fit (`pyro_dag.gp.amplitude`).
        `before`: the factor bounded below by {rules['before']['floor']}, every node matching its left-out errors to
        the variance of a new observation; `no floor, observation variance`: the same with the floor
        {rules['default']['floor']:g} only; `default`: that floor, and a node with children matching the errors to
        its latent function's variance (the nugget left out), since its children take that function (on a leaf the
        last two rules are the same). Same problems, same process, the rule switched between fits. Random
        regression draws:
        `random_regression` on `x -> y`, the zoo's default path; only their noise-free draws are counted here (the
        rule does not touch a node with learned noise). Linked simulators: `x -> s1 -> s2 -> s3` of
        `benchmarks/multifidelity_auto.py`, 200 runs each, s3 predicted from x (target: sd / RMSE at most 2). The
        rule was chosen on draws 100-199 and on the linked simulators; draws 500-599 were not looked at
        before. {code_note([d])}""")]
    return Section("Deterministic nodes: does the leave-one-out amplitude give calibrated intervals?",
                   f"`{d['command']}`", tab, notes, ["amplitude_rule.json"])


def sec_zoo_generated(R):
    """Random problems from a seed (``zoo.py --generated``): the share of runs and draws meeting each target."""
    if not R.glob("zoo_generated.json"):
        return None
    d = R("zoo_generated.json")
    shares = _zoo_targets().generated_targets(d)
    gen = d.get("generated", {})
    rows = []
    for name, gs in shares.items():
        for label, (rm, rn, dm, dn) in gs["per_target"].items():
            rows.append([name, label, f"{rm}/{rn} ({rm / rn:.0%})", f"{dm}/{dn} ({dm / dn:.0%})"])
    tab = table(["generator", "target (the default path)", "runs meeting it (draw × stream)",
                 "draws meeting it on every stream"], rows)
    by = {}
    for r in d["rows"]:
        if not r.get("error") and r.get("rmse") is not None:
            by.setdefault(r["problem"], {}).setdefault(r["method"], []).append(r)
    per_draw = []
    draws_of = Counter(p.split("-")[1] for p in by if "default" in by[p])
    long_lists = sorted(k for k, v in draws_of.items() if v > 30)
    for p in sorted(by, key=lambda n: (n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1]))):
        m = by[p]
        if "default" not in m:
            continue
        dm = mean([r["rmse"] for r in m["default"]])
        gp = mean([r["rmse"] for r in m["exact_gp"]]) if "exact_gp" in m else None
        if draws_of[p.split("-")[1]] > 30:   # a long list: only the draws that miss a target on some stream
            picps = [r.get("picp95") for r in m["default"] if r.get("picp95") is not None]
            ratio = _zoo_targets().GENERATED_RATIO.get(d["problems"].get(p, {}).get("kind"), 1.2)
            if (not gp or dm <= ratio * gp) and all(PICP_BAND[0] <= x <= PICP_BAND[1] for x in picps):
                continue
        info = d["problems"].get(p, {})
        hidden = f" ({len(info.get('hidden', []))} hidden)" if p.split("-")[1] == "latent" else ""
        per_draw.append(f"{p.split('-', 1)[1]}{hidden}: {g(dm)}"
                        + (f" / {g(gp)} = {dm / gp:.2f}×" if gp else "")
                        + f", PICP95 {mean([r.get('picp95') for r in m['default']]):.2f}")
    errors = [f"{r['problem']} stream {r['seed']} {r['method']}: {r['error'][:80]}" for r in d["rows"] if r.get("error")]
    # what ran, from the rows (the metadata is the last command's, and runs are resumed in chunks)
    ran = {}
    for r in d["rows"]:
        if r["method"] == "default" and r["problem"].startswith("gen-"):
            _, generator, draw = r["problem"].split("-")
            ran.setdefault(generator, {}).setdefault(int(draw), set()).add(r["seed"])
    def runs_of(v):   # consecutive draws with the same streams share one entry: "draws 100-109 on streams 0/1/2"
        groups = []
        for dr, st in sorted(v.items()):
            if groups and groups[-1][2] == st and groups[-1][1] == dr - 1:
                groups[-1][1] = dr
            else:
                groups.append([dr, dr, st])
        return ", ".join(f"{a}{'' if a == b else f'-{b}'} on stream{'s' if len(st) > 1 else ''} "
                         f"{'/'.join(map(str, sorted(st)))}" for a, b, st in groups)
    what = "; ".join(f"`{k}`: draws {runs_of(v)}" for k, v in sorted(ran.items()))
    notes = [para(f"""Draws of each generator (seeds not looked at while the defaults were tuned) and the
        optimisation streams that ran: {what}; the data of a draw are the same on every stream, and on `smooth` /
        `nonstationary` so is the default's exact fit. The rule for deterministic nodes' amplitude
        (`pyro_dag.gp.amplitude`) was chosen on draws 100-199 and checked on draws 500-599, not looked at before.
        `latent`: `pyro_dag.datasets.random_latent` (1-2 roots with 1-3 input
        columns, 1-3 inner nodes, mostly hidden, GP-drawn or composed mechanisms, observed nodes with noise of 2-20 %
        of their sd, n = 200 training and 1000 held-out cases, standardised); `smooth` / `nonstationary`:
        `pyro_dag.datasets.random_regression` on the graph `x -> y`, where the default path is an exact GP fitted
        exactly (`DeepRegression` on the same draws is the deep-regression section). Methods as in the zoo: `default` is
        `DAGDGP(graph)`, `AutoStructuredGuide(model)`, `train(..., num_steps=3000)`, `predict`; the exact GP, least
        squares and the training mean see the roots' columns. Targets per run: RMSE (against the noise-free target)
        not above the training mean's; at most {d.get('generated', {}).get('ratio_targets', {}).get('latent', 1.2)}×
        the exact GP's RMSE on the same stream; fitted noise variance within 10× the truth either way; PICP95 in
        [{PICP_BAND[0]}, {PICP_BAND[1]}]."""),
             para("Per draw (default RMSE / exact GP RMSE, mean over streams; the default's PICP95"
                  + (f"; for {', '.join(long_lists)}, with over 30 draws, only the draws missing a target"
                     if long_lists else "") + "): "
                  + "; ".join(per_draw) + "." + (" Failed rows: " + "; ".join(errors) + "." if errors else ""))]
    return Section("Do the defaults hold on random problems drawn from a seed (generated zoo draws)?",
                   "`python benchmarks/zoo.py --generated latent smooth nonstationary --draws 100-109 --seeds 0-4`"
                   " (in chunks: `--resume`)", tab, notes, ["zoo_generated.json"])


def _zoo_targets():
    """``benchmarks/zoo_targets.py`` (standard library only), the zoo's targets."""
    import importlib.util

    name = "pyro_dag_benchmarks_zoo_targets"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "zoo_targets.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def sec_csv_boston(R):
    d = R("csv_boston.json")
    rows, worse = [], []
    for w, m in d["per_node"].items():
        b = m["baselines"]
        best = min((k for k in b if k != "mean"), key=lambda k: b[k])
        ratio = m["rmse"] / b[best]
        if ratio > 1.05:
            worse.append(w)
        rows.append([w, g(m["rmse"]), g(m["rmse_propagate"]), g(b.get("exact_gp_on_parents")),
                     g(b.get("exact_gp_on_inputs")), g(b.get("linear_on_parents")), g(b.get("linear_on_inputs")),
                     g(b.get("mean")), f"{best} ({ratio:.2f}×)", calib_cell(m)])
    tab = table(["node", "one-step", "propagate", "exact GP on parents", "exact GP on inputs", "linear on parents",
                 "linear on inputs", "mean", "best baseline (one-step / it)", f"one-step {CALIB_HEAD}"], rows)
    notes = [para(f"""`{d["command"]}` on the MASS Boston data ({d["n_rows"]} rows, log crim; the DAG written down
        before fitting: {", ".join(f"{a} → {b}" for a, b in d["edges"])}), {d["k"]}-fold cross-validation, held-out
        RMSE in standardised units (mean over the folds), one thread, {d["cpu_seconds"]:.0f} CPU s in all. The
        library's defaults: every node's parents are measured, so `train` fits each exactly on its collapsed bound
        with every training row an inducing input (`num_inducing` {d["num_inducing"]}); one-step predicts each node
        from the measured values of its parents, propagate from the roots only. The baselines are fitted on the same
        rows and folds. Target (issue 33): one-step at or below the best of exact GP / linear regression on the same
        columns, or a printed warning: {yes(not worse)} ({"every node within 5 % of its best baseline" if not worse
        else "worse on " + ", ".join(worse) + ", with a BaselineWarning printed"}).""")]
    return Section("Does the CSV workflow match an exact GP and linear regression on a real data set (Boston, 5-fold)?",
                   "`python benchmarks/csv_boston.py`", tab, notes, ["csv_boston.json"])


ROBUSTNESS_CLASSES = ("bad input", "fault", "interruption", "misuse", "files", "concurrency", "new inputs",
                      "scale")


def sec_csv_folds(R):
    d = R("csv_folds.json")
    rows = [["one fit (a 20 % test split)", f"{d['one_fit_cpu_s']:.1f}", f"{d['one_fit_rmse']:.3f}", "1.0"],
            ["--folds 5", f"{d['folds5_cpu_s']:.1f}", f"{d['cv_rmse']:.3f}"
             + (f" ± {d['cv_rmse_sd']:.3f}" if d.get("cv_rmse_sd") is not None else ""), f"{d['ratio']:.2f}"]]
    tab = table(["command", "CPU s", "held-out RMSE (standardised)", "CPU / one fit"], rows)
    per_fold = ", ".join(f"{x:.1f}" for x in d.get("fold_cpu_s", []))
    notes = [para(f"""`pyro-dag fit --csv data.csv --graph graph.txt --threads 1 --no-progress`, with and without
        `--folds 5`, each in a fresh process (imports and reading included), on {d['rows']} rows x {d['columns']}
        columns of synthetic data with the diabetes data's shape (10 correlated inputs, a non-linear target; the
        graph every input -> target; `benchmarks/csv_folds.py` writes it). The folds' own CPU seconds: {per_fold}.
        Issue 43's target, 5 folds under {d['target_ratio']:g}x one fit's CPU:
        {yes(d['ratio'] < d['target_ratio'])} ({d['ratio']:.2f}x). Load average
        {', '.join(f'{x:.1f}' for x in d['load'])} at the end, 2 cores. {code_note([d])}""")]
    return Section("What does cross-validation of a CSV fit cost? (csv folds)",
                   "`python benchmarks/csv_folds.py` (under the shared lock: `flock /tmp/pyro_dag_bench.lock ...`)", tab, notes, ["csv_folds.json"])


def sec_robustness(R):
    d = R("robustness.json")
    s = d["summary"]
    rows = []
    for c in ROBUSTNESS_CLASSES:
        if c not in s["by_class"]:      # a run before the class existed
            continue
        k = s["by_class"][c]
        rows.append([c, str(sum(k.values())), str(k["clear"]), str(k["poor"]), str(k["silently wrong"])])
    t = s["totals"]
    rows.append(["all", str(s["cases"]), str(t["clear"]), str(t["poor"]), str(t["silently wrong"])])
    tab = table(["class", "cases", "clear", "poor", "silently wrong"], rows)
    by_id = {r["id"]: r for r in d["rows"]}
    entries = sorted({r["entry"] for r in d["rows"] if r["class"] != "control"})

    def listed(ids):
        return "; ".join(f"`{i}` ({by_id[i]['entry']}: {by_id[i]['reason']})" for i in ids) or "none"

    poor_by_entry = {e: sum(1 for i in s["poor"] if by_id[i]["entry"] == e) for e in entries}
    notes = [para(f"""{s["cases"]} tiny cases (a handful of rows, a few training steps) as a new user would try
        them, over {len(entries)} entry points: `DAGDGP` + `train` + `predict`, `AutoStructuredGuide`,
        `MultiFidelityEmulator`, `LatentSEM`, LaMP, `DeepRegression`, `pyro_dag.structure` (`fit`,
        `exact_posterior`, queries), `to_inference_data`, saved fits and checkpoints, and the `pyro-dag` command
        line (in process); the options and files of issues 41 and 43 (`noise_step`, `minibatch`,
        `deterministic_amplitude`, `exact_fit_nodes`, `load(dtype=, map_location=)`, `DeepRegression(method=)`,
        `LatentMAP(init=, lengthscale=)`, the emulator's kernel choice) have their own cases
        (`benchmarks/robustness_cases_features*.py`), and so do `train`'s candidate starts (`candidate_starts`,
        `candidate_steps`: bad values, refused combinations, Ctrl-C and non-finite losses inside a candidate;
        `benchmarks/robustness_cases_candidates.py`). Each case
        declares what a good answer is and the script classifies the outcome mechanically (its docstring has the
        rules): **clear** is an error of the library's own types or `ValueError` / `TypeError` (an `OSError` for a
        full disk) naming the input, before the expensive work, or a warning naming it, or a sound result for a
        valid but unusual input; **poor** is a raw torch / Pyro / numpy error, a misleading message, an error after
        the work, or an input accepted without a word; **silently wrong** is a non-finite or wrong result, or a
        broken file left behind, without a warning. {s["controls"]["clear"]} of {s["controls"]["cases"]} control
        cases (valid input) came out clear{"" if s["controls"]["clear"] == s["controls"]["cases"] else
        " (**the harness needs fixing**)"}; {len(s["battery_errors"])} cases failed inside the battery itself.
        Target (issue 42; its classes files, concurrency, new inputs and scale): none silently wrong, at most
        {s["target"]["poor"]} poor:
        {yes(s["target"]["met"])} ({t["silently wrong"]} silently wrong, {t["poor"]} poor)."""),
             para(f"Silently wrong: {listed(s['silently_wrong'])}."),
             para(f"Poor: {listed(s['poor'])}."),
             para("Poor cases per entry point: " + (", ".join(f"{e} {n}" for e, n in poor_by_entry.items() if n)
                                                     or "none") +
                  f". Run: {'the quick subset' if d['quick'] else 'every case'}, {d['seconds']:.0f} s in all "
                  f"(one thread){', at commit ' + d['commit'][:10] if d.get('commit') else ''}.")]
    return Section("Does bad input get a clear answer? (the bad-input battery)", "`python benchmarks/robustness.py`",
                   tab, notes, ["robustness.json"])


def sec_structure_interventions(R):
    d = R("structure_interventions.json")
    labels = {"ours": "exact BGe posterior, known targets (ours)", "observational": "same rows as observational (ours)",
              "gies": "GIES (BIC, known targets)"}
    cells = sorted({(r["p"], r.get("obs_rows", 200), r.get("exp_rows", 200)) for r in d["runs"]})
    rows, checks = [], []
    for cell in cells:
        by = {}
        for r in d["runs"]:
            if (r["p"], r.get("obs_rows", 200), r.get("exp_rows", 200)) == cell:
                by.setdefault(r["method"], []).append(r)
        for m in ("ours", "observational", "gies"):
            rs = by.get(m)
            if not rs:
                continue
            rows.append([f"p = {cell[0]}, {cell[1]} + {cell[2]} per experiment", labels[m], f(mean([r["auroc"] for r in rs])),
                         f(mean([r["e_shd_icpdag"] for r in rs]), 2),
                         f"{mean([r['oriented'] for r in rs]):.2f} / {mean([r['identifiable'] for r in rs]):.1f}",
                         f(mean([r["cpu_s"] for r in rs]), 1), len(rs)])
        if "ours" in by and "gies" in by:
            o, gs = by["ours"], by["gies"]
            ok = (mean([r["oriented"] for r in o]) >= mean([r["oriented"] for r in gs])
                  and mean([r["auroc"] for r in o]) >= mean([r["auroc"] for r in gs]))
            cpu_ok = max(r["cpu_s"] for r in o) < 60
            checks.append(f"p = {cell[0]} ({cell[1]} + {cell[2]} rows): oriented {mean([r['oriented'] for r in o]):.2f} "
                          f"vs GIES {mean([r['oriented'] for r in gs]):.2f}, AUROC {mean([r['auroc'] for r in o]):.3f} vs "
                          f"{mean([r['auroc'] for r in gs]):.3f} ({yes(ok)}), at most {max(r['cpu_s'] for r in o):.1f} CPU s "
                          f"({yes(cpu_ok)})")
    tab = table(["cell", "method", "edge AUROC", "E-SHD (I-CPDAG)", "true edges oriented / identifiable", "CPU s",
                 "seeds"], rows)
    loads = [r["load"] for r in d["runs"] if r.get("load") == r.get("load")]
    notes = [para("""Erdős-Rényi DAGs with p nodes and p edges, weights ±U(0.5, 1.5), unit noise; observational rows plus
        one experiment on each of p // 2 random single nodes (set to N(0, 1)). *Oriented*: true edges directed
        correctly in the I-essential graph of the estimate (Hauser & Bühlmann 2012) with respect to the experiments'
        target family (ours: the mean over 1000 exact posterior samples; GIES: its estimate); *identifiable*: those
        the target family can orient at all. AUROC of GIES: edge frequencies over 200 random members of its
        estimated class. E-SHD: interventional-CPDAG level. One thread; CPU seconds per data set; load average """
                  f"{min(loads):.1f}-{max(loads):.1f} on 2 cores." if loads else "."),
             para("Targets (issue 44: at least as many true edges oriented as GIES and an AUROC at least GIES's, "
                  "p = 12 in under 60 CPU s): " + "; ".join(checks) + ".")]
    return Section("Structure learning from known experiments: random networks against GIES",
                   "`python benchmarks/structure_interventions.py --p 8 12 --seeds 5` (and `--obs-rows 100 "
                   "--exp-rows 50`)", tab, notes, ["structure_interventions.json"])


def sec_structure_design(R):
    d = R("structure_design.json")
    cells = sorted({(r["p"], r["obs_rows"], r["exp_rows"]) for r in d["runs"]})
    rows, checks = [], []
    names = {"eig": "expected information gain", "random": "random node", "round_robin": "round robin"}
    for cell in cells:
        rs = [r for r in d["runs"] if (r["p"], r["obs_rows"], r["exp_rows"]) == cell]
        seeds = sorted({r["seed"] for r in rs if r["strategy"] == "eig"} & {r["seed"] for r in rs
                                                                            if r["strategy"] == "random"})
        by = {s: {r["seed"]: r for r in rs if r["strategy"] == s} for s in names}

        def cnt(r, key):
            v = r[key]
            return r["max_experiments"] if v is None else v
        for s, label in names.items():
            sr = [by[s][k] for k in seeds if k in by[s]]
            if not sr:
                continue
            rows.append([f"p = {cell[0]}, {cell[1]} rows + {cell[2]} per experiment", label,
                         f(mean([cnt(r, "experiments") for r in sr]), 1),
                         f"{sum(r['experiments'] is not None for r in sr)} / {len(sr)}",
                         f(mean([cnt(r, "experiments_orientation") for r in sr]), 1),
                         f"{sum(r['experiments_orientation'] is not None for r in sr)} / {len(sr)}",
                         f(mean([r["cpu_s"] for r in sr]), 1)])
        if seeds:
            e = mean([cnt(by["eig"][k], "experiments") for k in seeds])
            rnd = mean([cnt(by["random"][k], "experiments") for k in seeds])
            eo = mean([cnt(by["eig"][k], "experiments_orientation") for k in seeds])
            ro = mean([cnt(by["random"][k], "experiments_orientation") for k in seeds])
            checks.append(f"p = {cell[0]}, {len(seeds)} seeds: true DAG {e:.1f} / {rnd:.1f} = "
                          f"{e / rnd:.2f}x random ({yes(e <= 0.6 * rnd)}); orientation {eo:.1f} / {ro:.1f} = "
                          f"{(eo / ro if ro else float('nan')):.2f}x")
    tab = table(["cell", "choice of the next experiment", "experiments to P(true DAG) ≥ 0.9", "reached",
                 "experiments to P(no true edge reversed) ≥ 0.9", "reached", "CPU s per run"], rows)
    st = d["settings"]
    maxes = ", ".join(f"p = {p}: {m}" for p, m in sorted({(r["p"], r["max_experiments"]) for r in d["runs"]}))
    notes = [para(f"""Erdős-Rényi DAGs with p nodes and p edges, weights ±U(0.5, 1.5), unit noise. After each experiment
        (one node set to N(0, 1) in the new rows) the exact interventional BGe posterior is recomputed from all rows and
        P(true DAG) and P(no true edge reversed) are read exactly; a run stops when both reach 0.9 or after the
        cell's maximum ({maxes}; a run that does not reach 0.9 counts as that maximum, so those means are lower
        bounds). Expected information gain: `next_experiment` over the p single-node
        candidates with {st['eig_samples']} Monte Carlo draws. The same data stream seeds every strategy. Why the
        true-DAG column barely moves: the posterior mass missing from the true DAG sits on DAGs with an extra weak
        edge (seed 0 after 16 round-robin experiments: every true edge above 0.99, every absent edge below 0.011,
        P(true DAG) 0.88), a mass that shrinks like N^-1/2 with the number of rows whichever node is set; the
        orientation, which only experiments settle, is where the choice matters. p = 12 costs about 8 CPU s per
        expected-information-gain step at the first step (one thread), more as experiments add row groups."""),
             para("Target (issue 44: at most 0.6x the experiments of random choice to reach 0.9 on the true DAG, "
                  "mean over seeds): " + "; ".join(checks) + ".")]
    return Section("Which experiment next? Sequential design on random networks",
                   "`python benchmarks/structure_design.py --p 8 --seeds 0 ... 19`", tab, notes,
                   ["structure_design.json"])


def sec_structure_sachs_interventions(R):
    d = R("structure_sachs_interventions.json")
    labels = {"known": "exact BGe, published targets (ours)", "unknown": "exact BGe, targets learned (ours)",
              "observational": "exact BGe, 7466 rows as observational (ours)",
              "observational_853": "exact BGe, the 853 unperturbed rows (ours)",
              "gies_known": "GIES (BIC), published targets", "gies_observational": "GIES (BIC), rows as observational"}
    rows = []
    for r in sorted(d["runs"], key=lambda r: (r["scale"] != "log", list(labels).index(r["method"]))):
        rows.append([r["scale"], labels[r["method"]], f(r["auroc"]), f(r["e_shd"], 1), f(r["e_shd_icpdag"], 1),
                     f(r["auroc_cdt"]), f(r["auroc_bnlearn"]), f(r["mean_edges"], 1), f(r["cpu_s"], 1)])
    tab = table(["scale", "method", "AUROC (consensus)", "E-SHD", "E-SHD (I-CPDAG)", "AUROC (cdt)", "AUROC (bnlearn)",
                 "edges", "CPU s"], rows)
    by = {(r["scale"], r["method"]): r for r in d["runs"]}
    checks = []
    for scale in ("log", "raw"):
        g, o = by.get((scale, "gies_known")), by.get((scale, "observational_853"))
        for m in ("known", "unknown"):
            r = by.get((scale, m))
            if r and g and o:
                ok = r["auroc"] >= g["auroc"] and r["e_shd_icpdag"] <= g["e_shd_icpdag"] and r["auroc"] >= o["auroc"] + 0.05
                checks.append(f"{scale}, {labels[m]}: AUROC {r['auroc']:.3f} vs GIES {g['auroc']:.3f} and "
                              f"observational {o['auroc']:.3f}, E-SHD {r['e_shd_icpdag']:.1f} vs GIES "
                              f"{g['e_shd_icpdag']:.1f} ({yes(ok)})")
    learned = by.get(("log", "unknown"), {}).get("targets_learned", {})
    shown = "; ".join(f"{k}: {', '.join(v) if v else 'none'}" for k, v in learned.items())
    notes = [para("""The nine conditions of Sachs et al. (2005) pooled (7466 rows), their published targets (AKT inhibitor:
        Akt; G0076: PKC; psitectorigenin: PIP2; U0126: Mek; LY294002: PIP3; PMA: PKC; β2cAMP: PKA;
        `pyro_dag.datasets.SACHS_CONDITIONS`), columns standardised after the log (or raw). Truth: the 17-edge
        acyclic consensus DAG (AUROC also against cdt's 18 edges and bnlearn's 17). E-SHD: posterior
        expectation (GIES: its estimated class), DAG level and interventional-CPDAG level of the published target
        family. *Targets learned*: every condition but CD3/CD28 alone may change the mechanism of any node (prior
        0.1 per node and condition), summed out exactly (Eaton & Murphy 2007). One thread, CPU seconds."""),
             para("Taken as perfect interventions, the published targets do not help: the known-target posterior is "
                  "no better than all rows taken as observational, and both are dense. A likely cause: the "
                  "inhibitors block the activity of their target, not its measured phosphorylation, so the measured "
                  "target and its children do not follow a perfect intervention on the target. With the targets "
                  "learned, each condition is found to change many mechanisms (posterior above 0.5, log scale: "
                  f"{shown or 'not run'}). The published target family orients every edge of the consensus DAG, so "
                  "the two E-SHD levels coincide. Sachs et al.'s network and Eaton & Murphy's ROC curves were "
                  "computed on discretised data against other reference graphs and are not restated here."),
             para("Targets (issue 44: AUROC and E-SHD at least GIES's and clearly above the observational posterior "
                  "of the 853 rows): " + "; ".join(checks) + ".")]
    return Section("Sachs with its conditions: known and learned targets against GIES",
                   "`python benchmarks/structure_sachs_interventions.py` (and `--raw`)", tab, notes,
                   ["structure_sachs_interventions.json"])



PARTS = [
    ("Variational inference: estimator, guides, speed", [
        sec_gradient_variance, sec_tree_scaling, sec_sampler_work, sec_sampler_rule_trees, sec_collider,
        sec_collider_timing, sec_collider_recipe_ab, sec_setup_scaling, sec_rows_scaling, sec_rows_scaling_cli,
        sec_quickstart,
        sec_collider_data_seeds, sec_collider_default_streams, sec_collider_noise_step_ab, sec_collider_explaining_away, sec_collider_explaining_away_refine, sec_chain_gpytorch,
        sec_gpu, sec_distributed,
        sec_threads, sec_generic,
        sec_conformance]),
    ("MCMC, calibration and the prior", [sec_nuts, sec_traced, sec_guide_mcmc, sec_nuts_release,
                                         sec_nuts_release_ess, sec_sbc, sec_prior_collapse]),
    ("Applications: the papers' studies and their peers", [
        sec_sachs_regression, sec_mf_published, sec_mf_hf_scarce, sec_mf_pooled, sec_mf_auto, sec_mf_calibration,
        sec_lamp, sec_sem_quadratic,
        sec_sem_predictive, sec_sem_mixing]),
    ("Structure learning", [sec_structure_er, sec_structure_sachs, sec_structure_sweep, sec_two_node,
                            sec_fit_vs_exact, sec_trust, sec_structure_priors, sec_structure_networks, sec_structure_gp,
                            sec_structure_gp_peers, sec_structure_gp_sachs, sec_structure_networks_fit,
                            sec_structure_interventions, sec_structure_design, sec_structure_sachs_interventions]),
    ("Right by default: the defaults against the tools a user already has", [sec_zoo, sec_zoo_generated,
                                                                              sec_amplitude_rule,
                                                                               sec_defaults_ab, sec_deep_regression,
                                                                               sec_csv_boston, sec_csv_folds]),
    ("Bad input, faults and interruptions", [sec_robustness]),
]

INTRO = """# Benchmarks

<!-- Generated by `python benchmarks/report.py` from benchmarks/results/*.json; do not edit by hand. -->

*Generated by `python benchmarks/report.py` from the JSON files in `benchmarks/results/`; do not edit by hand
(`tests/test_benchmarks_report.py` fails when this file and the JSON disagree).* One section per question: the command
that reproduces it, one summary table, and the conditions, caveats and targets of the runs; the history of repeated
runs stays in the JSON.

**Running them.** `pip install -e ".[test,bench]"` (the `bench` extra brings the peers: GPyTorch, emukit, GPy and
DiBS). Run a script from the repository root, e.g. `python benchmarks/collider.py`: it writes its JSON into
`benchmarks/results/` and regenerates this file (`python benchmarks/report.py` does that alone, running nothing;
`--check` only compares). The slow reproductions among the tests run with `pytest -m slow`.

**One thread.** Every script runs one intra-op thread per process (`common.one_thread()`), as the library's loops do
by default: on a small loaded machine torch's thread pool makes loops of small steps several times slower (*How many
threads should a fit use?*). The runs shared a small machine with other jobs, so seconds are inflated and noisy:
compare within a table and prefer CPU seconds where given.

**Numbers.** Every number here is read from the JSON, except the papers' published values and the targets quoted
beside them: constants of `report.py` (`PUBLISHED`, `TARGETS`) or of the benchmark script that compares with them.

**Calibration.** Beside every RMSE of a method with a predictive distribution stand PICP95 (coverage of the central
95 % predictive interval by the held-out observations; the target band is [0.88, 0.99]), CRPS and NLPD, as
*PICP95 / CRPS / NLPD* where the table has no column of its own for them; *n.r.* marks a score the JSON of that run
did not record (the run predates the column: re-running the benchmark fills what its script computes)."""


def _sections(R, tree):
    out = []
    for part, fns in PARTS:
        secs = []
        for fn in fns:
            start = len(R.log)
            sec = fn(R)
            if sec is None:   # a section whose results do not exist (yet)
                continue
            states = [s for name in sorted(set(R.log[start:])) for s in measurement_states(R(name))]
            del R.log[start:]
            sec.status, sec.status_line = staleness(states, tree)
            secs.append(sec)
        out.append((part, secs))
    return out


def staleness_summary(parts, tree):
    """The README's opening list: the current tree, then the stale sections and those without a record."""
    secs = [s for _, ss in parts for s in ss]
    link = lambda s: f"[{s.title}](#{anchor(s.title)})"  # noqa: E731
    stale = [s for s in secs if s.status == "stale"]
    unknown = [s for s in secs if s.status == "not recorded"]
    current = [s for s in secs if s.status == "current"]
    out = [para(f"""**Staleness.** Generated for the library tree `{tree}` (the git tree hash of `pyro_dag/` on
        disk: `git rev-parse HEAD:pyro_dag` when it has no uncommitted changes; `benchmarks/tree_state.py`). Every
        results JSON records the tree it was measured on (`code`); a section measured on another tree says so under
        its title. A tree that differs from the current one only in docstrings and comments ran the same code; so
        does one that differs only in library modules the measuring process did not load, where the JSON records
        them (`code.used`, written since this record existed, and not for a run that started other processes).
        {len(current)} of {len(secs)} sections were measured on the current tree or the same code, {len(stale)} are
        stale and {len(unknown)} do not record their tree.""")]
    if stale:
        out += ["", "Stale (measured on another library tree): " + "; ".join(link(s) for s in stale) + "."]
    if unknown:
        out += ["", "Tree not recorded (measured before the record existed): " + "; ".join(link(s) for s in unknown)
                + "."]
    return "\n".join(out)


TREE_LINE = "Generated for the library tree `"


def readme_tree(text):
    """The library tree a generated README says it was generated for (``None`` if it says none)."""
    i = text.find(TREE_LINE)
    return text[i + len(TREE_LINE):].split("`", 1)[0] if i >= 0 else None


_TREE = {}


def current_tree_for_report():
    """The library tree the README being generated compares with (the one :func:`generate` was given)."""
    return _TREE.get("tree") or current_tree()


def generate(results=RESULTS, tree=None):
    """The README text, and the set of results files (relative to ``results``) it read. ``tree``: the library tree
    the sections are compared with (default: :func:`current_tree`)."""
    tree = tree or current_tree()
    _TREE["tree"] = tree
    R = Results(results)
    parts = _sections(R, tree)
    toc = []
    for part, secs in parts:
        toc.append(f"* {part}: " + "; ".join(f"[{s.title}](#{anchor(s.title)})" for s in secs))
    body = [INTRO, "", staleness_summary(parts, tree), "", "**Contents.**", "", "\n".join(toc), ""]
    for part, secs in parts:
        body += [f"## {part}", ""]
        body += [s.render() for s in secs]
    text = "\n".join(body).rstrip() + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text, R.used


def anchor(title):
    """GitHub's anchor of a heading."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def results_files(results=RESULTS):
    """Every results file that a section must read or ``NOT_REPORTED`` must list (per-run folders aside)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(results):
        dirnames.sort()
        for fn in sorted(filenames):
            if fn.endswith(".json") and not fn.endswith("_quick.json"):
                out.append(os.path.relpath(os.path.join(dirpath, fn), results).replace(os.sep, "/"))
    return out


def unaccounted(used, results=RESULTS):
    """Results files that no section read, that ``NOT_REPORTED`` does not list and no per-run folder covers."""
    return [n for n in results_files(results)
            if n not in used and n not in NOT_REPORTED and n.split("/")[0] not in PER_RUN_FOLDERS]


def write(path=README):
    """Regenerate the README at ``path`` from the JSON; returns the path."""
    text, _ = generate()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def regenerate():
    """What a benchmark script calls after writing its JSON (through ``common.write_readme_section`` or
    ``structure_common.write_readme_block``): regenerate the whole README. A results file this module cannot read
    yet does not lose the run (its JSON is already written): the README is left as it was, with a message."""
    try:
        path = write()
    except Exception as e:  # noqa: BLE001 - the benchmark's own results are safe; say what to fix
        print(f"benchmarks/README.md not regenerated ({type(e).__name__}: {e}); extend benchmarks/report.py for the "
              "new results, then run python benchmarks/report.py", file=sys.stderr)
        return None
    print(f"regenerated {os.path.relpath(path)} from benchmarks/results (python benchmarks/report.py)")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=README, help="where to write (default: benchmarks/README.md)")
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing; exit 1 if different")
    args = ap.parse_args(argv)
    text, used = generate()
    missing = unaccounted(used)
    if missing:
        print("results files neither reported nor listed in NOT_REPORTED: " + ", ".join(missing), file=sys.stderr)
    if args.check:
        with open(args.out, encoding="utf-8") as fh:
            old = fh.read()
        same = old == text
        why = ("the library tree changed since it was generated (stale marks)" if readme_tree(old) != readme_tree(text)
               else "differs from the JSON")
        print(f"{args.out}: {'up to date' if same else why + '; run python benchmarks/report.py'}")
        return 0 if same and not missing else 1
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.out} ({text.count(chr(10))} lines)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
