"""Which library code a benchmark measured: the git tree hash of the ``pyro_dag/`` folder as it is on disk.

A number is true only for the code it was measured on. Every results JSON records ``code`` (``common.write_json``
adds it), and ``benchmarks/report.py`` marks a section whose JSON were measured on another tree than the current one
as stale. The identity used is the git *tree* hash of the working copy's ``pyro_dag/`` folder (tracked files and
untracked files git does not ignore, with their content on disk), computed without writing anything into the
repository. With no uncommitted library changes it equals ``git rev-parse HEAD:pyro_dag``; with uncommitted changes
it is the hash that folder will have once those changes are committed as they are. So a benchmark run on
uncommitted edits that are then committed unchanged stays current, and commits that change only tests, docs or
benchmarks do not make any table stale.

Standard library only (``report.py`` reads it without torch).
"""
import hashlib
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIBRARY = "pyro_dag"


def _git(*args, cwd=ROOT):
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _object(kind, body):
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def _tree_hash(entries):
    """Git's tree object id of ``entries`` ``{name: (mode, sha1 bytes)}`` (git sorts a folder's name as 'name/')."""
    def key(name):
        mode = entries[name][0]
        return name.encode() + (b"/" if mode == "40000" else b"")
    body = b"".join(f"{entries[n][0]} {n}".encode() + b"\0" + entries[n][1] for n in sorted(entries, key=key))
    return _object("tree", body)


def _files(root, folder):
    """``[(relative path, full path)]`` of the library's files: git's view (tracked and untracked-but-not-ignored)
    in a checkout, else every file under the folder but bytecode caches (a copy made by ``git archive``)."""
    listing = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder, cwd=root)
    if listing is not None and listing.strip(b"\0"):
        return [(p, os.path.join(root, p)) for p in sorted({p for p in listing.decode().split("\0") if p})]
    base = os.path.join(root, folder)
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".egg-info"))
        for fn in sorted(filenames):
            if not fn.endswith((".pyc", ".pyo")):
                full = os.path.join(dirpath, fn)
                out.append((os.path.join(folder, os.path.relpath(full, base)).replace(os.sep, "/"), full))
    return out


def working_tree_hash(root=ROOT, folder=LIBRARY):
    """The git tree id (40 hex digits) of ``folder`` as it is on disk: tracked and untracked-but-not-ignored files,
    their current content and executable bit; deleted files left out (outside a git checkout: every file but
    bytecode caches). ``None`` when there is no such folder.

    Equals ``git rev-parse HEAD:folder`` when ``folder`` has no uncommitted changes."""
    tree = {}
    for path, full in _files(root, folder):
        if os.path.islink(full):
            mode, body = "120000", os.readlink(full).encode()
        elif os.path.isfile(full):
            mode = "100755" if os.access(full, os.X_OK) else "100644"
            with open(full, "rb") as fh:
                body = fh.read()
        else:   # listed by git but deleted on disk (an uncommitted deletion)
            continue
        node = tree
        parts = path.split("/")[1:]   # relative to folder
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = (mode, _object("blob", body))
    if not tree:
        return None

    def digest(node):
        entries = {}
        for name, value in node.items():
            entries[name] = ("40000", digest(value)) if isinstance(value, dict) else value
        return _tree_hash(entries)
    return digest(tree).hex()


def code_state(root=ROOT, folder=LIBRARY, library_path=None):
    """What a results JSON records as ``code``:

    * ``tree``: :func:`working_tree_hash` of ``pyro_dag/`` (the identity ``report.py`` compares);
    * ``commit``: ``git rev-parse HEAD``; ``committed_tree``: ``git rev-parse HEAD:pyro_dag``;
    * ``modified``: the library files that differed from the commit (``git status --porcelain``); ``tree`` differs
      from ``committed_tree`` exactly when this is not empty;
    * ``library_path``: where the measured library was imported from, when given and not ``root/pyro_dag`` (a frozen
      copy, e.g. ``git archive HEAD pyro_dag``): ``tree`` is then that copy's hash.
    """
    def text(*args):
        out = _git(*args, cwd=root)
        return "" if out is None else out.decode()
    # porcelain lines are "XY path": not stripped, the first line's status may start with a space
    modified = [line[3:] for line in text("status", "--porcelain", "--", folder).splitlines() if line.strip()]
    state = {"tree": working_tree_hash(root, folder), "commit": text("rev-parse", "HEAD").strip(),
             "committed_tree": text("rev-parse", f"HEAD:{folder}").strip(), "modified": sorted(modified)}
    if library_path and os.path.realpath(library_path) != os.path.realpath(os.path.join(root, folder)):
        parent, name = os.path.split(os.path.realpath(library_path))
        state.update(tree=working_tree_hash(parent, name), library_path=library_path)
    return state


def tree_of_commit(commit, root=ROOT, folder=LIBRARY):
    """``git rev-parse COMMIT:pyro_dag`` or ``None`` (unknown commit, no git)."""
    out = _git("rev-parse", "--verify", "--quiet", f"{commit}:{folder}", cwd=root)
    return out.decode().strip() if out else None


def code_of(source):
    """``ast.dump`` of Python ``source`` without its docstrings (module, class and function ones) and, as any AST,
    without comments and layout: two sources with the same value run the same code. ``None`` if it does not
    parse."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


_SAME_CODE = {}


def same_code(tree, root=ROOT, folder=LIBRARY, modules=None):
    """Whether the library tree ``tree`` (a git tree id, as results JSON record it) differs from the library on disk
    in docstrings, comments and layout only: the same files, each either byte-equal or a Python file with the same
    :func:`code_of`. ``None`` when git does not have ``tree`` (e.g. a shallow clone). A number measured on such a
    tree is true for the code on disk.

    ``modules``: the library's Python files the measuring process had loaded (:func:`library_used`); only those, and
    every file that is not Python (data the library reads), are compared. A module the measurement did not load
    cannot have run; one it would load now can only be reached through a loaded module, whose code would then
    differ."""
    key = (tree, root, folder, None if modules is None else tuple(sorted(modules)))
    if key in _SAME_CODE:
        return _SAME_CODE[key]
    listing = _git("ls-tree", "-r", "-z", tree, cwd=root)
    if listing is None:
        _SAME_CODE[key] = None
        return None
    measured = {}
    for entry in listing.decode().split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            measured[f"{folder}/{path}"] = meta.split()[2]
    on_disk = {path: full for path, full in _files(root, folder) if os.path.isfile(full)}
    if modules is not None:
        wanted = set(modules)
        measured = {p: h for p, h in measured.items() if p in wanted or not p.endswith(".py")}
        on_disk = {p: f for p, f in on_disk.items() if p in wanted or not p.endswith(".py")}
        result = set(measured) == set(on_disk) and wanted <= set(measured)
    else:
        result = set(measured) == set(on_disk)
    for path in sorted(measured) if result else ():
        with open(on_disk[path], "rb") as fh:
            body = fh.read()
        if _object("blob", body).hex() == measured[path]:
            continue
        old = _git("cat-file", "blob", measured[path], cwd=root)
        old_code = code_of(old) if path.endswith(".py") and old is not None else None
        if old_code is None or old_code != code_of(body):
            result = False
            break
    _SAME_CODE[key] = result
    return result


# ----------------------------------------------------------------------------------------------------------------
# Which of the library's modules a measurement ran
# ----------------------------------------------------------------------------------------------------------------
_SPAWNED = {"any": False}
_NOT_PYTHON = {"git", "tar"}   # what the benchmarks' helpers run that cannot import the library


def _note_spawn(args=None):
    if args is not None:
        first = args if isinstance(args, (str, bytes, os.PathLike)) else (list(args)[:1] or [""])[0]
        first = os.fsdecode(first).split()[0] if os.fsdecode(first).strip() else ""
        if os.path.basename(first) in _NOT_PYTHON:
            return
    _SPAWNED["any"] = True


def watch_processes():
    """Record whether this process starts other processes (which may import and run the library where
    :func:`library_used` cannot see it): ``subprocess`` (but git and tar), ``fork`` (``multiprocessing``'s default,
    ``os.spawn*``), ``multiprocessing``'s spawn and forkserver starts, ``os.system`` and ``os.posix_spawn``.
    Idempotent."""
    import subprocess as sp

    if getattr(sp.Popen._execute_child, "_watched", False):
        return
    real_child = sp.Popen._execute_child

    def execute_child(self, args, *rest, **kw):
        _note_spawn(args)
        return real_child(self, args, *rest, **kw)
    execute_child._watched = True
    sp.Popen._execute_child = execute_child
    os.register_at_fork(before=_note_spawn)
    for name in ("system", "posix_spawn", "posix_spawnp"):
        real = getattr(os, name, None)
        if real is not None:
            def wrapped(*a, _real=real, **k):
                _note_spawn()
                return _real(*a, **k)
            setattr(os, name, wrapped)
    try:
        import multiprocessing.util as mp_util
    except ImportError:   # pragma: no cover
        return
    real_spawn = mp_util.spawnv_passfds

    def spawnv_passfds(*a, **k):
        _note_spawn()
        return real_spawn(*a, **k)
    mp_util.spawnv_passfds = spawnv_passfds


def library_used(folder=LIBRARY):
    """What this process ran of the library: ``{"modules": [paths], "spawned": bool}``, the library's Python files
    loaded so far (``folder/...``, relative to the package's parent, wherever it was imported from) and whether the
    process started others since :func:`watch_processes`. Taken when a benchmark writes its results, after every
    number in them was computed: ``report.py`` then compares only these files with the library on disk
    (:func:`same_code`), unless ``spawned``."""
    import sys

    package = sys.modules.get(folder)
    base = getattr(package, "__file__", None)
    if base is None:
        return {"modules": [], "spawned": _SPAWNED["any"]}
    base = os.path.dirname(os.path.dirname(os.path.realpath(base)))
    paths = set()
    for name, module in list(sys.modules.items()):
        if name != folder and not name.startswith(folder + "."):
            continue
        path = getattr(module, "__file__", None)
        if path:
            rel = os.path.relpath(os.path.realpath(path), base).replace(os.sep, "/")
            if rel.startswith(folder + "/"):
                paths.add(rel)
    return {"modules": sorted(paths), "spawned": _SPAWNED["any"]}
