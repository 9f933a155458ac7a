"""The argument types and the output-directory probe that the ``pyro-dag`` sub-commands share.

Each type checks one option when the command line is parsed, before any training starts, and raises
``argparse.ArgumentTypeError`` with the reason, which ``argparse`` turns into exit status 2 and a message naming
the option: :func:`positive_int`, :func:`non_negative_int`, :func:`positive_float`, :func:`unit_interval`,
:func:`fraction`, :func:`torch_device`, :func:`output_dir`. :func:`prepare_output_dir` creates a directory and proves it writable,
so that an unwritable output fails before a long fit rather than after it.
"""
import argparse
import math
import os
import tempfile

__all__ = ["positive_int", "non_negative_int", "positive_float", "unit_interval", "fraction", "torch_device",
           "output_dir", "prepare_output_dir"]


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_int(text):
    """``argparse`` type: an integer ``>= 1``."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {text}")
    return value


def non_negative_int(text):
    """``argparse`` type: an integer ``>= 0``."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (>= 0), got {text}")
    return value


def positive_float(text):
    """``argparse`` type: a finite number ``> 0`` (NaN and inf are refused)."""
    value = _float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def unit_interval(text):
    """``argparse`` type: a step size in ``[0, 1]`` (0 switches the step off)."""
    value = _float(text)
    if not 0 <= value <= 1:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a step size in (0, 1] (0: off), got {text}")
    return value


def fraction(text):
    """``argparse`` type: a share strictly between 0 and 1 (e.g. of the rows held out)."""
    value = _float(text)
    if not 0 < value < 1:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a fraction strictly between 0 and 1 (e.g. 0.2), got {text}")
    return value


def torch_device(text):
    """``argparse`` type: ``cpu``, ``cuda`` or ``cuda:N``, CUDA only where it is available; returns the string."""
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and (kind == "cpu" or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"{text!r} is not supported: use cpu, cuda or cuda:N")
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine; use cpu")
        if index and int(index) >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA "
                                             f"device(s) (cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    return text


def output_dir(text):
    """``argparse`` type: a directory that exists and is writable, or that can be created (its nearest existing
    ancestor is a writable directory). Nothing is created here."""
    if not text:
        raise argparse.ArgumentTypeError("is empty; give a directory")
    path = os.path.abspath(text)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text} is not writable")
        return text
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {parent} is not writable")
    return text


def prepare_output_dir(parser, path, option="--out"):
    """Create ``path`` and write a probe file in it, so that an unwritable output fails before training."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        parser.error(f"argument {option}: {path} is not writable ({e.strerror or e})")
