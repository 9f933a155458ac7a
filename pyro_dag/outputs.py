"""Writing a run's output files atomically, and saying which files of a set were written when one fails.

A file written in place is left empty or cut short when the disk fills or the process is killed half way (a
``figure.png`` of 0 bytes beside complete JSON). Every output file of the experiments and the command line
(``fit collider``, ``fit sachs``, ``fit --csv``, ``fit multifidelity``, ``discover``) is therefore written to a
temporary file in the same folder, flushed to disk and moved over the target with :func:`os.replace`
(:func:`atomic_write`): the target then holds either its previous content or the complete new one, never a part.
:class:`OutputSet` writes the files of one run in turn and, when one fails, raises an :class:`OutputError` naming
that file, the files already written completely and those not written.
"""
import contextlib
import errno as errno_codes
import glob
import json
import os
import tempfile

__all__ = ["OutputError", "OutputSet", "atomic_write", "remove_leftovers", "save_figure", "torch_save", "write_json"]


class OutputError(OSError):
    """An output file could not be written (e.g. the disk is full); the message names the file and, within an
    :class:`OutputSet`, which files of the set are complete. ``.path`` is the file that failed."""

    def __init__(self, errno, message, path):
        super().__init__(errno, message)
        self.path = path

    def __str__(self):
        return self.strerror


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary_prefix(path):
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    stem, ext = os.path.splitext(name)
    return directory, f".{stem}.tmp-", ext


def remove_leftovers(path):
    """Remove the temporary files that :func:`atomic_write` of ``path`` left behind when a process was killed
    while writing it (``.{stem}.tmp-*{ext}`` beside ``path``); returns their paths.

    Only files of this target are touched, so runs writing other files in the same folder are safe; a second
    process writing the same file at the same moment would lose its temporary file (and raise), as it would race
    for the file itself anyway."""
    directory, prefix, ext = _temporary_prefix(path)
    removed = []
    for leftover in glob.glob(os.path.join(glob.escape(directory), glob.escape(prefix) + "*" + glob.escape(ext))):
        with contextlib.suppress(OSError):
            os.unlink(leftover)
            removed.append(leftover)
    return removed


def atomic_write(path, write, clean=False):
    """Write the file ``path`` atomically: ``write(tmp)`` writes a temporary file ``tmp`` in the same folder (with
    the same extension, so that writers that read the format from the name work), which is synced to disk and then
    moved over ``path``. On failure the temporary file is removed and ``path`` is left as it was.

    :param write: ``write(tmp_path)``, e.g. ``lambda tmp: frame.to_csv(tmp, index=False)``.
    :param bool clean: first remove the temporary files of ``path`` that killed writers left
        (:func:`remove_leftovers`; for files written again and again, such as checkpoints).
    :returns: ``path``.
    :raises OutputError: naming ``path``, when writing fails with an :class:`OSError` (a full disk, a quota, a
        folder that cannot be written); other errors propagate unchanged (the temporary file is removed).
    """
    path = os.fspath(path)
    directory, prefix, ext = _temporary_prefix(path)
    if clean:
        remove_leftovers(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=ext, dir=directory)
        os.close(fd)
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        if isinstance(e, OutputError):
            raise
        raise OutputError(e.errno, f"could not write {path} ({e.strerror or e}); the file was left as it was "
                          "before (no partial file)", path) from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path


def torch_save(obj, f):
    """``torch.save(obj, f)`` (``f`` a path or a binary file), with torch's write failures raised as :class:`OSError`.

    torch writes through its own C++ writer, which reports a failed write (a full disk, a quota) as a
    ``RuntimeError`` ("PytorchStreamWriter failed writing file ...", "unexpected pos ..."); as an ``OSError`` (the
    errno of the failed write when torch kept it, else ``EIO``) it is reported like any other failed output
    (:func:`atomic_write` turns it into an :class:`OutputError` naming the file).
    """
    import torch

    if isinstance(f, (str, bytes, os.PathLike)):
        # our own file object, closed on every path: torch's C++ writer would keep its file open (a deleted temporary
        # file, after a failed write) for as long as the exception's traceback lives
        with open(f, "wb") as fh:
            return torch_save(obj, fh)
    try:
        torch.save(obj, f)
    except RuntimeError as e:
        cause = e.__context__ if isinstance(e.__context__, OSError) else None
        detail = (str(e).strip().splitlines() or [""])[0][:160]
        code = cause.errno if cause is not None and cause.errno else errno_codes.EIO
        reason = cause.strerror if cause is not None and cause.strerror else "is the disk full?"
        raise OSError(code, f"torch.save failed: {reason}" + ("" if cause is not None else f" ({detail})")) from e


def write_json(path, obj, **kwargs):
    """``json.dump(obj, f, **kwargs)`` to ``path``, atomically (:func:`atomic_write`); returns ``path``."""
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, **kwargs)
    return atomic_write(path, write)


def save_figure(fig, path, **kwargs):
    """``fig.savefig(path, **kwargs)`` atomically (:func:`atomic_write`), then close ``fig`` (also on failure);
    returns ``path``."""
    import matplotlib.pyplot as plt

    fmt = os.path.splitext(os.fspath(path))[1][1:] or None
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, **kwargs))
    finally:
        plt.close(fig)


class OutputSet:
    """The output files of one run, written in turn into ``directory``, each atomically.

    :param str directory: the output folder (created if needed).
    :param list names: the file names the run will write, in order (for the message when one fails).

    Example::

        out = OutputSet(out_dir, ["metrics.json", "figure.png"])
        out.json("metrics.json", metrics, indent=2)
        out.write("figure.png", lambda tmp: save_figure(fig, tmp))
    """

    def __init__(self, directory, names):
        self.directory, self.names, self.done = os.fspath(directory), list(names), []
        os.makedirs(self.directory, exist_ok=True)

    def path(self, name):
        return os.path.join(self.directory, name)

    def write(self, name, write):
        """Write ``name`` with ``write(tmp_path)`` atomically (:func:`atomic_write`); returns its path."""
        return self.call([name], lambda: atomic_write(self.path(name), write))

    def json(self, name, obj, **kwargs):
        """Write ``obj`` as JSON to ``name`` atomically; returns its path."""
        return self.call([name], lambda: write_json(self.path(name), obj, **kwargs))

    def call(self, names, fn):
        """Run ``fn()``, which writes the files ``names`` itself, in that order (each atomically, e.g. with
        :func:`save_figure`); returns what ``fn`` returns.

        :raises OutputError: when ``fn`` fails with an :class:`OSError`, naming the file that failed, the files of
            the set written completely and those not written.
        """
        try:
            result = fn()
        except OSError as e:
            failed = getattr(e, "path", None) or self.path(names[0])
            failed_name = os.path.basename(failed)
            if failed_name in names:     # ``fn`` writes its files in the order of ``names``
                self.done += [n for n in names[:names.index(failed_name)] if n not in self.done]
            missing = [n for n in self.names if n not in self.done and n != failed_name]
            done = ", ".join(self.done) or "none"
            rest = ", ".join(missing) or "none"
            raise OutputError(
                e.errno, f"could not write {failed} ({e.strerror or e}). The outputs in {self.directory} are "
                f"incomplete: written completely: {done}; not written: {failed_name}" +
                (f", {rest}" if missing else "") + ". No partial file was left (a file of the same name from an "
                "earlier run is unchanged); free some space or choose another output folder, and run again",
                failed) from e
        self.done += [n for n in names if n not in self.done]
        return result
