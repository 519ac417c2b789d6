"""Paths the user names: what kind of file a path is, reading small text inputs, and the checks every
command makes on its output paths before it reads anything.

The rule behind :func:`check_outputs`: a run never writes over one of its inputs (the dump's files, a
rules file, a configuration, a baseline, a results JSON) and never writes two of its outputs to one
file. Two paths are the same file when they resolve to the same path (symbolic links followed) or,
for existing files, share device and inode (hard links).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from rcdiag.errors import UsageError

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
"""The suffixes of the parquet files a directory or a glob is searched for."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(path: str | Path) -> str | None:
    """What ``path`` is when it exists but is no regular file (``"a FIFO (named pipe)"``, …);
    None for a regular file or a path that does not exist (symbolic links are followed).

    Example:
        >>> file_kind("/"), file_kind("/no/such/path")
        ('a directory', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), None)


def printable(text: str) -> str:
    r"""``text`` safe to show on one line of a terminal, a log or a CI summary: characters that are
    not printable (control characters such as escape sequences and newlines, bidirectional
    overrides, undecodable file-name bytes) are spelled as Python escapes; the rest is kept.

    Example:
        >>> print(printable("run\x1b[2J\nname.parquet"))
        run\x1b[2J\nname.parquet
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def read_text_input(path: Path, what: str, parquet_hint: str = "") -> str:
    """The UTF-8 text of a small input file (a rules file, a baseline, a configuration, results).

    Args:
        path: the file.
        what: what it should be, for messages (``"rules file"``).
        parquet_hint: said after "it looks like a parquet dump" when the file is one.

    Raises:
        UsageError: naming the file: missing, no regular file (a FIFO would block), unreadable, a
            parquet file, or not UTF-8 text.
    """
    kind = file_kind(path)
    if kind is not None:
        raise UsageError(f"{path}: cannot read {what} (it is {kind}, not a regular file)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if data[:4] == b"PAR1":
        raise UsageError(f"{path}: not a {what} (it looks like a parquet dump{parquet_hint})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not a {what} (byte {exc.start} is not UTF-8 text; is it a binary file?)"
        ) from None


def _identity(path: Path) -> tuple[Path, tuple[int, int] | None]:
    """The resolved path and, when the file exists, its (device, inode)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        inode = None
    else:
        inode = (info.st_dev, info.st_ino)
    return path.resolve(), inode


def _same(a: tuple[Path, tuple[int, int] | None], b: tuple[Path, tuple[int, int] | None]) -> bool:
    return a[0] == b[0] or (a[1] is not None and a[1] == b[1])


def _check_output_path(flag: str, raw: str) -> Path:
    """One output path as given: not empty, not a directory, inside a writable directory."""
    where = f"{flag} {printable(raw)}" if raw else flag
    if not raw:
        raise UsageError(f"{flag}: empty path; give a file name")
    if raw.endswith(("/", os.sep)) or raw in (".", "..") or raw.endswith(("/.", "/..")):
        raise UsageError(f"{where}: names a directory (it ends in /); give a file name")
    path = Path(raw)
    kind = file_kind(path)
    if kind == "a directory":
        raise UsageError(f"{where}: is a directory; give a file name")
    if kind in ("a socket", "a block device"):
        raise UsageError(f"{where}: is {kind}, not a file rcdiag can write")
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    parent_kind = file_kind(parent)
    if parent.exists() and parent_kind != "a directory":
        raise UsageError(f"{where}: {printable(str(parent))} is not a directory")
    if kind is None and not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: cannot write in {printable(str(parent))} (permission denied)")
    return path


def check_outputs(
    outputs: Mapping[str, str | Path | None], inputs: Mapping[str, Iterable[Path]]
) -> dict[str, Path]:
    """Check a run's output paths before it reads anything.

    Args:
        outputs: option (``--json``) → the path as given on the command line (a trailing ``/``
            still there); None when the output is not asked for.
        inputs: what (``"a file of the dump"``, ``"--rules"``) → the files the run reads
            (iterated only after the outputs' own checks, and only when there are outputs).

    Returns:
        option → path, for the outputs asked for.

    Raises:
        UsageError: an output path that is empty, ends in ``/`` or is a directory, lies under a
            file or in a directory that cannot be written, is one of the inputs, or is the path of
            another output.
    """
    checked = {
        flag: _check_output_path(flag, str(raw)) for flag, raw in outputs.items() if raw is not None
    }
    seen: list[tuple[str, Path, tuple[Path, tuple[int, int] | None]]] = []
    for flag, path in checked.items():
        identity = _identity(path)
        for other, other_path, other_identity in seen:
            if _same(identity, other_identity):
                raise UsageError(
                    f"{flag} {printable(str(path))} and {other} {printable(str(other_path))} are "
                    "the same file; give each output its own path"
                )
        seen.append((flag, path, identity))
    if not seen:
        return checked
    for what, files in inputs.items():
        for file in files:
            identity = _identity(file)
            for flag, path, output_identity in seen:
                if _same(identity, output_identity):
                    alias = "" if file == path else f"the same file as {printable(str(file))}, "
                    raise UsageError(
                        f"{flag} {printable(str(path))} is {alias}an input of this run ({what}); "
                        "refusing to overwrite it (choose another output path)"
                    )
    return checked
