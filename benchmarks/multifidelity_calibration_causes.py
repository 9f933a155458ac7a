"""Why do the emulator's 95 % intervals miss? A diagnostic of ``MultiFidelityEmulator(...).fit()`` per problem (issue 41
item 3), run on the tuning set only (named chains stream 0, random draws 100-111): per fidelity, its runs, kernel,
noise decision, the cross-validation factor (raw and applied); at the test points, PICP95 and the mean / median of
``r² / σ²`` of the emulator's predictive, and of the exact fit of that fidelity with the parents' *true* values
(``tp``) or their posterior means (``mp``) plugged in (does the miss come from the parent's propagated error, or from
the fidelity's own fit?); the median distance of test points and of runs to their nearest run (outside the hull?).

    python benchmarks/multifidelity_calibration_causes.py OUT.jsonl forrester:50,14:0 currin:200,25:0 ... r100-111
    python benchmarks/multifidelity_calibration_causes.py --analyze OUT.jsonl

The second form replays amplitude rules on the recorded held-out and test residuals (test PICP95 of each refined
fidelity given its true parents, ``test_c95`` the factor that would cover 95 % of its test points; the top
fidelity's replay scales its whole predictive, exact only where the parents' propagated variance is negligible). ``DIAG_LOO_MIN``
/ ``DIAG_FLOOR`` override ``LOO_MIN_RUNS`` / ``LOO_SCALE_FLOOR``. It wraps library internals (``_auto_model``, the
scale functions) to record them: a diagnostic, not a benchmark with a results JSON. Not timed.
"""
import sys, os, warnings, json, math
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np, torch
from common import one_thread
one_thread()
import pyro
from pyro_dag.emulation import MultiFidelityEmulator, auto_fit, selection
from pyro_dag.datasets.multifidelity import chain_problem
from pyro_dag.datasets.random_multifidelity import random_multifidelity

RAW = []
_cv, _loo = selection.cv_variance_scale, selection.loo_variance_scale
ZS = []; ZL = []
def cvw(*a, **k):
    k1 = {kk: vv for kk, vv in k.items() if kk != "level"}
    r, var = selection.cv_residuals(*a, **k1)
    z = (r / var.sqrt()).numpy(); ZS.append(z)
    ZL.append(None)
    v = _cv(*a, **k)
    RAW.append(("cv", a[2].shape[0], v)); return v
def loow(*a, **k):
    kernel, Z, y, noise = a[:4]
    with selection.isolated():
        L = selection._cholesky(kernel, Z, noise)
    Cinv = torch.cholesky_inverse(L); d = Cinv.diagonal()
    ZS.append(((Cinv @ y) / d * d.sqrt()).numpy()); ZL.append(None)
    v = _loo(*a, **k); RAW.append(("loo", a[2].shape[0], v)); return v
selection.cv_variance_scale, selection.loo_variance_scale = cvw, loow
if os.environ.get("DIAG_LOO_MIN"):
    auto_fit.LOO_MIN_RUNS = int(os.environ["DIAG_LOO_MIN"])
if os.environ.get("DIAG_FLOOR"):
    auto_fit.LOO_SCALE_FLOOR = float(os.environ["DIAG_FLOOR"])
_am = auto_fit.AutoFitMixin._auto_model
def am(self, sel, fitted, rows_of):
    self._fitted = fitted; return _am(self, sel, fitted, rows_of)
auto_fit.AutoFitMixin._auto_model = am

@torch.no_grad()
def exact_pred(em, f, Zq):
    kernel, noise, Z, y, order = em._fitted[f]
    with selection.isolated():
        L = selection._cholesky(kernel, Z, noise)
        Ks = kernel(Zq, Z)
        m = (Ks @ torch.cholesky_solve(y[:, None], L))[:, 0]
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        var = (kernel(Zq, diag=True) - v.pow(2).sum(0)).clamp_min(0) + noise
    return m.numpy(), var.numpy()

def zstats(err, sd):
    z = err / sd
    return dict(picp=float(np.mean(np.abs(z) <= 1.96)), mz2=float(np.mean(z ** 2)), medz2=float(np.median(z**2)))

def run(p, seed=0):
    pyro.clear_param_store(); RAW.clear(); ZS.clear(); ZL.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = MultiFidelityEmulator(p.train, p.parents, bounds=p.bounds, seed=seed).fit()
        Xt, yt = p.test
        pred = em.predict(Xt)
    out = {"name": p.name, "desc": getattr(p, "description", "")}
    sel = em.selection
    fids = em.mf.fidelities
    out["fid"] = {}
    for i, f in enumerate(fids):
        c = [c for c in sel.candidates if c.fidelity == f and c.kernel == sel.chosen[f]][0]
        raw = RAW[i][2] if i < len(RAW) else None
        n = em._fitted[f][3].shape[0]
        d = dict(n=n, kernel=sel.chosen[f], det=sel.deterministic[f], raw=raw, c=c.variance_scale)
        if f in p.truth:
            tr = (p.truth[f](Xt)[:, 0] - em.y_loc[f]) / em.y_scale[f]
            m = (pred[f].mean - em.y_loc[f]) / em.y_scale[f]; sd = np.sqrt(pred[f].variance) / em.y_scale[f]
            d.update({k + "": v for k, v in zstats(tr - m, sd).items()})
            d["rmse"] = float(np.sqrt(np.mean((tr - m) ** 2)))
            # exact prediction with parents' truth vs their exact means (no propagation)
            xq = torch.as_tensor(em._scale_x(Xt), dtype=torch.float64)
            if em.mf.parents[f]:
                order = em._fitted[f][4]
                cols_t = {em.mf.input: xq}; cols_m = {em.mf.input: xq}
                for q in em.mf.parents[f]:
                    cols_t[q] = torch.as_tensor((p.truth[q](Xt)[:, 0] - em.y_loc[q]) / em.y_scale[q])[:, None]
                    cols_m[q] = em._exact_mean(q, xq, em._fitted)[:, None]
                d["zcv"] = ZS[i].tolist() if i < len(ZS) else None
                d["zloo"] = ZL[i].tolist() if i < len(ZL) and ZL[i] is not None else None
                mm, vv = exact_pred(em, f, torch.cat([cols_t[o] for o in order], 1))
                d["ztp"] = ((tr - mm) / np.sqrt(vv)).tolist()
                for tag, cols in (("tp", cols_t), ("mp", cols_m)):
                    mm, vv = exact_pred(em, f, torch.cat([cols[o] for o in order], 1))
                    s = zstats(tr - mm, np.sqrt(vv))
                    d[tag] = {k: round(v, 3) for k, v in s.items()}
                    d[tag]["rmse"] = round(float(np.sqrt(np.mean((tr - mm) ** 2))), 4)
        out["fid"][f] = d
    # hull / distance
    Xs = em._scale_x(em.mf.X)[np.asarray(em.mf.observed(fids[-1]))]
    xq = em._scale_x(Xt)
    dist = lambda A, B: np.sqrt(((A[:, None] - B[None]) ** 2).sum(-1))
    Dd = dist(Xs, Xs); np.fill_diagonal(Dd, np.inf)
    out["nn_design"] = float(np.median(Dd.min(1))); out["nn_test"] = float(np.median(dist(xq, Xs).min(1)))
    tr = p.truth[fids[-1]](Xt)[:, 0]
    m = pred[fids[-1]].mean; sd = np.sqrt(pred[fids[-1]].variance)
    out["top"] = zstats(yt[:, 0] - m, sd)
    out["ztop"] = ((yt[:, 0] - m) / sd).tolist()
    return out


def analyze(path):
    rows = [json.loads(l) for l in open(path)]
    def conf(z, alpha=0.05):
        s = np.sort(np.abs(z)); n = len(s); k = math.ceil((1 - alpha) * (n + 1))
        return (s[min(k, n) - 1] / 1.959964) ** 2
    def rule_current(z, n, det):
        c = float(np.mean(np.square(z)))
        floor = 0.1 if det and n >= 30 else 1.0
        return min(max(c, floor), 1e3)
    rules = {
     "Lcurrent": rule_current,
     "Lconf_floor": lambda z, n, det: min(max(conf(z), 0.1 if det and n >= 30 else 1.0), 1e3),
     "Lconf_fl.1": lambda z, n, det: min(max(conf(z), 0.1), 1e3),
     "Lconf_fl.01": lambda z, n, det: min(max(conf(z), 0.01), 1e3),
     "current": rule_current,
     "conf": lambda z, n, det: min(max(conf(z), 0.01), 1e3),
     "conf_floor": lambda z, n, det: min(max(conf(z), 0.1 if det and n >= 30 else 1.0), 1e3),
     "max": lambda z, n, det: max(rule_current(z, n, det), conf(z)),
     "conf_fl.1": lambda z, n, det: min(max(conf(z), 0.1), 1e3),
    }
    res = {r: [] for r in rules}; top = {r: [] for r in rules}
    for o in rows:
        fids = list(o["fid"]); line = f"{o['name'][:10]:10s}"
        for f, d in o["fid"].items():
            if d.get("zcv") is None or d.get("ztp") is None: continue
            z_unit = np.array(d["ztp"]) * math.sqrt(d["c"])
            zc = np.array(d["zcv"]); zl = np.array(d["zloo"]) if d.get("zloo") else zc
            line += f" | {f} n{d['n']} det{int(d['det'])} cm {np.mean(zc**2):.3g} cq {conf(zc):.3g} lm {np.mean(zl**2):.3g} lq {conf(zl):.3g} test_c95 {np.quantile(z_unit**2,0.95)/3.84:.3g}:"
            for r, fn in rules.items():
                c = fn(zl if r.startswith("L") else zc, d["n"], d["det"])
                p = float(np.mean(np.abs(z_unit / math.sqrt(c)) <= 1.96)); res[r].append(p)
                line += f" {p:.2f}"
                if f == fids[-1]:
                    zt = np.array(o["ztop"]) * math.sqrt(d["c"] / c)
                    top[r].append(float(np.mean(np.abs(zt) <= 1.96)))
        print(line)
    for r in rules:
        a = np.array(res[r]); t = np.array(top[r])
        print(f"{r:12s} per-fid tp-in-band {np.mean((a>=.88)&(a<=.99)):.2f} ({len(a)})  top-in-band {np.mean((t>=.88)&(t<=.99)):.2f} ({len(t)}) top picps {np.round(t,2).tolist()}")


if __name__ == "__main__":
    if sys.argv[1] == "--analyze":
        analyze(sys.argv[2])
        sys.exit()
    OUT = sys.argv[1]; which = sys.argv[2:]
    probs = []
    for w in which:
        if w.startswith("r"):
            a, b = map(int, w[1:].split("-"))
            probs += [(random_multifidelity(s, num_test=500), 0) for s in range(a, b + 1)]
        else:
            name, sizes, seed = w.split(":")
            probs.append((chain_problem(name, [int(v) for v in sizes.split(",")], num_test=500, seed=int(seed)), int(seed)))
    for p, seed in probs:
        o = run(p, seed)
        with open(OUT, "a") as fh: fh.write(json.dumps(dict(o, seed=seed)) + "\n")
        for f, d in o["fid"].items(): d.pop("zcv", None); d.pop("zloo", None); d.pop("ztp", None)
        print(f"== {o['name']} s{seed} {o['desc']}  top PICP {o['top']['picp']:.3f} mz2 {o['top']['mz2']:.2f} medz2 {o['top']['medz2']:.2f} nn_design {o['nn_design']:.3f} nn_test {o['nn_test']:.3f}")
        for f, d in o["fid"].items():
            print("   ", f, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()})
        sys.stdout.flush()
