"""The package's layout stays the one its README describes: no import cycle between pyro_dag's modules (imports
placed inside functions count too), no module over 600 lines, the model (pyro_dag.dgp) imports nothing from
pyro_dag.infer, and ``import pyro_dag`` loads no sub-package."""
import ast
import pathlib
import subprocess
import sys

import networkx as nx

ROOT = pathlib.Path(__file__).resolve().parents[1] / "pyro_dag"
MAX_LINES = 600


def _modules():
    mods = {}
    for f in ROOT.rglob("*.py"):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return mods


def import_graph():
    """``networkx.DiGraph`` of pyro_dag's modules, an edge ``a -> b`` for each import of ``b`` in ``a`` (anywhere in
    the module, inside functions too)."""
    mods = _modules()
    graph = nx.DiGraph()
    for name, (path, is_pkg) in mods.items():
        graph.add_node(name)
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    stem = base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])
                    module = ".".join(stem)
                else:
                    module = node.module or ""
                if module.split(".")[0] == "pyro_dag":
                    targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "pyro_dag"]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name:
                    graph.add_edge(name, t)
    return graph


def test_no_import_cycle():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == [], f"import cycles (imports inside functions count): {cycles}"


def test_the_model_imports_nothing_from_infer():
    graph = import_graph()
    below = nx.descendants(graph, "pyro_dag.dgp") | {"pyro_dag.dgp"}
    assert not [m for m in below if m.startswith("pyro_dag.infer")]


def test_no_module_over_600_lines():
    long = {str(f.relative_to(ROOT.parent)): n for f, _ in _modules().values()
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules: {long}"


def test_import_pyro_dag_is_lazy():
    code = "import sys, pyro_dag; print(sorted(m for m in sys.modules if m.startswith(('pyro_dag.', 'torch'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(ROOT.parent)).stdout
    assert out.strip() == "[]"


def test_the_model_alone_loads_no_inference_code_until_predict():
    """Issue 42: ``from pyro_dag import DAGDGP`` imported 51 modules of pyro_dag.infer only so that predict would
    find its implementation; it is now loaded at the first predict."""
    code = ("import sys\nfrom pyro_dag import DAGDGP\n"
            "print(len([m for m in sys.modules if m.startswith('pyro_dag.infer')]))\n"
            "from pyro_dag.dgp import handoff\n"
            "print(handoff.prediction('predict').__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(ROOT.parent)).stdout.split()
    assert out == ["0", "pyro_dag.infer.prediction"]
