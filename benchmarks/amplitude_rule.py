"""The leave-one-out amplitude of deterministic nodes (issue 41, item 4): the rule before this release against the
default, side by side on the same problems.

``pyro_dag.gp.amplitude`` scales a deterministic node's kernel amplitude and nugget by a leave-one-out factor after
its exact fit. Three rules:

* ``before``: the factor bounded below by 0.1, every node matching its left-out errors to the variance of a new
  observation (nugget included);
* ``no floor, observation variance``: the floor of 1e-6 only, every node as in ``before`` (what the floor alone
  does);
* ``default``: this tree's rule (a floor of 1e-6 only; a node with children matches them to its latent ``f``'s
  variance, the nugget left out, since its children take ``f``).

Problems: random regression draws (``pyro_dag.datasets.random_regression``, graph ``x -> y``, the zoo's default
path: ``benchmarks/zoo.py``'s ``run_method(..., "default")``), on which the rule matters only for noise-free draws;
and the three linked deterministic simulators of ``benchmarks/multifidelity_auto.py`` (``x -> s1 -> s2 -> s3``, 200
runs of each, s3 predicted from x, ``train(num_steps=3000)``). Scores: RMSE against the noise-free truth, PICP95,
the mean predictive sd over the RMSE, NLPD and CRPS (of a new observation).

    python benchmarks/amplitude_rule.py --draws 500-599 --linked 5
"""
import argparse
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import one_thread, write_json  # noqa: E402

#: ``{rule: (floor, a node with children calibrates its latent f)}``; ``None``: the library's floor.
RULES = {"before": (0.1, False), "no floor, observation variance": (None, False), "default": (None, True)}


#: The library's own floor and factor function, read once (``apply_rule`` patches the module constants).
_LIBRARY = {}


def apply_rule(rule):
    """Set the amplitude rule for the fits that follow in this process (the library's module constants)."""
    import pyro_dag.gp.amplitude as amplitude
    import pyro_dag.infer.training.collapsed as collapsed

    _LIBRARY.setdefault("floor", amplitude.AMPLITUDE_FACTOR_FLOOR)
    factor = _LIBRARY.setdefault("factor", amplitude.bounded_amplitude_factor)
    floor, latent = RULES[rule]
    amplitude.AMPLITUDE_FACTOR_FLOOR = _LIBRARY["floor"] if floor is None else floor
    collapsed.bounded_amplitude_factor = factor if latent else (
        lambda *a, **kw: factor(*a, **dict(kw, latent=False)))


def regression_row(kind, draw, rule):
    import zoo

    name = zoo.register_generated(kind, [draw])[0]
    case = zoo.PROBLEMS[name][1](0, False)
    r = zoo.run_method(name, case, 0, "default")
    return {"problem": name, "rule": rule, "deterministic": bool(case.deterministic), "rmse": r["rmse"],
            "picp95": r["picp95"], "mean_sd": r["mean_sd"], "nlpd": r["nlpd"], "crps": r["crps"],
            "cpu_seconds": r["cpu_seconds"], "error": r.get("error"), "description": case.description}


def linked_row(seed, rule):
    from multifidelity_auto import fit_linked_dagdgp, linked_data, linked_scores

    X, Xt, S, St = linked_data(seed)
    mean, var, cpu, model = fit_linked_dagdgp(seed, X, Xt, S)
    return {"problem": "linked3", "seed": seed, "rule": rule, "deterministic": True,
            **linked_scores(mean, var, St, S),
            "factors": {k: float(v) for k, v in model.amplitude_factors.items()}, "cpu_seconds": cpu}


def main(argv=None):
    import zoo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", default="500-599", help="random regression draws ('' for none)")
    ap.add_argument("--kinds", nargs="+", default=["smooth", "nonstationary"])
    ap.add_argument("--linked", type=int, default=5, help="streams of the three linked simulators")
    ap.add_argument("--out", default="amplitude_rule")
    args = ap.parse_args(argv)
    one_thread()
    apply_rule("default")
    rows = []
    payload = {"schema": "amplitude_rule/1", "command": "python " + shlex.join(sys.argv), "rules": {
        k: {"floor": _LIBRARY["floor"] if v[0] is None else v[0], "latent_for_parents": v[1]}
        for k, v in RULES.items()}, "rows": rows}
    for kind in args.kinds:
        for draw in (zoo.parse_range(args.draws) if args.draws else []):
            for rule in RULES:
                apply_rule(rule)
                rows.append(regression_row(kind, draw, rule))
                print(rows[-1], flush=True)
        write_json(args.out, payload)
    for seed in range(args.linked):
        for rule in RULES:
            apply_rule(rule)
            rows.append(linked_row(seed, rule))
            print(rows[-1], flush=True)
        write_json(args.out, payload)
    write_json(args.out, payload)   # the table: benchmarks/report.py (sec_amplitude_rule)


if __name__ == "__main__":
    main()
