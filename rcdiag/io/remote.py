"""Dumps on object stores and web servers: ``s3://``, ``gs://``, ``hf://``, ``http(s)://`` (and
``file://``, read as a local path).

Remote files are reached through fsspec and the backend of their scheme, each an optional extra of
rcdiag (``pip install 'rcdiag[s3]'``; docs/python-api.md, "Remote dumps"). They are read as local
files are: the parquet footer first, then record batch by record batch through a read-ahead buffer
of :data:`BLOCK_SIZE` bytes, so a dump is streamed, never downloaded whole. A directory (a prefix
of an object store) is searched recursively for parquet files, ``step=N/`` shards included, and a
glob (``s3://bucket/run/step=*/*.parquet``) is expanded by the store's listing.

Credentials and endpoints come from the backend's usual places (``AWS_*`` environment variables,
``~/.aws``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``HF_TOKEN``, …) or from ``storage_options``
(``--storage-option KEY=VALUE``), handed to the fsspec file system as keyword arguments.
"""

from __future__ import annotations

import glob
import importlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import unquote, urlparse

from rcdiag.errors import InputError, UsageError
from rcdiag.io.network import bound_retries, network_reason, with_timeouts
from rcdiag.io.paths import PARQUET_SUFFIXES

BLOCK_SIZE = 8 << 20
"""Bytes fetched ahead per request when a remote file is read (a bounded read-ahead buffer)."""

BACKENDS: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "s3"),
    "s3a": ("s3", "s3fs", "s3"),
    "gs": ("gs", "gcsfs", "gcs"),
    "gcs": ("gs", "gcsfs", "gcs"),
    "hf": ("hf", "huggingface_hub", "hf"),
    "http": ("http", "aiohttp", "http"),
    "https": ("https", "aiohttp", "http"),
}
"""URL scheme → (fsspec protocol, the module its backend needs, the rcdiag extra installing it)."""

SUPPORTED = "local paths, file://, s3://, gs://, hf://, http:// and https://"

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def scheme(raw: str | Path) -> str | None:
    """The scheme of a URL given as a string (lower case), None for a local path.

    Example:
        >>> scheme("S3://bucket/run/"), scheme("dumps/step=1"), scheme("C:/dumps")
        ('s3', None, None)
    """
    if not isinstance(raw, str):
        return None
    match = _URL.match(raw)
    return match[1].lower() if match else None


def is_remote(raw: str | Path) -> bool:
    """Whether ``raw`` is a URL that is not a ``file://`` one."""
    return scheme(raw) not in (None, "file")


def local_path(raw: str | Path) -> str | Path:
    """``raw`` with a ``file://`` URL turned into its local path; anything else unchanged.

    Example:
        >>> local_path("file:///data/run%201/"), local_path("dumps/")
        ('/data/run 1/', 'dumps/')

    Raises:
        UsageError: a ``file://`` URL naming another host.
    """
    if scheme(raw) != "file":
        return raw
    parsed = urlparse(str(raw))
    if parsed.netloc not in ("", "localhost"):
        raise UsageError(f"{raw}: a file:// URL names a local file (file:///path), not a host")
    return unquote(parsed.path)


@dataclass(frozen=True)
class RemotePath:
    """A file of a remote dump: its URL, for messages and ``source.paths``, and how to open it.

    Attributes:
        url: the file's URL (``s3://bucket/run/step=3/part-0.parquet``).
        key: its path in the file system (``bucket/run/step=3/part-0.parquet``).
        fs: the fsspec file system it lives in.
    """

    url: str
    key: str
    fs: Any = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.url

    @property
    def parent(self) -> PurePosixPath:
        """The directories above the file (a ``step=N`` one gives the step)."""
        return PurePosixPath(self.key).parent

    @property
    def name(self) -> str:
        return PurePosixPath(self.key).name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.key).suffix

    def size(self) -> int:
        return int(self.fs.size(self.key))

    def open(self) -> IO[bytes]:
        """The file opened for reading with a bounded read-ahead buffer (never read whole)."""
        handle: IO[bytes] = self.fs.open(
            self.key, "rb", block_size=BLOCK_SIZE, cache_type="readahead"
        )
        return handle


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def parse_storage_options(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--storage-option``) as keyword arguments of the file system; a value
    is read as JSON when it is JSON (``true``, ``3``, ``{"region_name": "eu-west-1"}``), else kept
    as text.

    Example:
        >>> parse_storage_options(["anon=true", "endpoint_url=http://127.0.0.1:9000"])
        {'anon': True, 'endpoint_url': 'http://127.0.0.1:9000'}

    Raises:
        UsageError: an item without ``=`` or with an empty key.
    """
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option {item!r}: expected KEY=VALUE")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options


def filesystem(raw: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec file system of a URL and the URL's path in it.

    Raises:
        UsageError: a scheme rcdiag does not read, or the backend of the scheme is not installed
            (naming the extra that installs it).
        InputError: the file system cannot be set up (bad storage options, say).
    """
    found = scheme(raw)
    if found is None or found not in BACKENDS:
        raise UsageError(f"{raw}: unsupported URL scheme '{found}://'; rcdiag reads {SUPPORTED}")
    protocol, module, extra = BACKENDS[found]
    try:
        import fsspec

        importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"{raw}: reading {found}:// URLs needs rcdiag's '{extra}' extra: "
            f"pip install 'rcdiag[{extra}]'"
        ) from None
    url = raw if found == protocol or "://" not in raw else f"{protocol}://{raw.split('://', 1)[1]}"
    options = with_timeouts(protocol, storage_options or {})
    try:
        # a fresh instance: a cached one would keep the endpoint and listings of an earlier call
        fs, key = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
        bound_retries(fs)
    except (ImportError, UsageError):
        raise
    except Exception as exc:
        raise InputError(f"{raw}: cannot open the {found}:// file system ({_reason(exc)})") from exc
    return fs, key


def _is_parquet(key: str, root: str) -> bool:
    """A parquet file under ``root`` that is not hidden (no part of its relative path starts with
    ``.`` or ``_``, as for local directories)."""
    relative = PurePosixPath(key).relative_to(PurePosixPath(root)) if root else PurePosixPath(key)
    return PurePosixPath(key).suffix.lower() in PARQUET_SUFFIXES and not any(
        part.startswith((".", "_")) for part in relative.parts
    )


def discover_remote(raw: str, storage_options: Mapping[str, Any] | None = None) -> list[RemotePath]:
    """The parquet files a URL names: one file, every parquet file under a directory (a prefix),
    or the files a glob matches; sorted as local paths are.

    Raises:
        UsageError: an unsupported scheme or a missing extra (:func:`filesystem`).
        InputError: nothing there, or the store cannot be listed (credentials, network).
    """
    fs, key = filesystem(raw, storage_options)
    web = scheme(raw) in ("http", "https")
    try:
        if glob.has_magic(key) and not web:
            matches = fs.glob(key, detail=True)
            keys = [k for k, info in matches.items() if info.get("type") != "directory"]
            if not keys:
                raise InputError(f"{raw}: no file matches this pattern")
        elif _kind(fs, key) == "file":
            keys = [key]
        elif fs.isdir(key):
            root = key.rstrip("/")
            keys = [k for k in fs.find(root) if _is_parquet(k, root)]
            if not keys:
                raise InputError(f"{raw}: directory holds no parquet file (*.parquet, *.pq)")
        else:
            raise InputError(f"{raw}: no such file or directory")
    except (InputError, UsageError, MemoryError):
        raise
    except Exception as exc:
        raise remote_failure(raw, exc, "cannot list the files") from exc
    keys = sorted(set(keys), key=PurePosixPath)
    return [RemotePath(fs.unstrip_protocol(k) if not web else k, k, fs) for k in keys]


def remote_failure(path: object, exc: BaseException, what: str) -> InputError:
    """The error for a remote file or listing that failed: a network failure (refused, unreachable,
    timed out) is named as one."""
    return InputError(f"{path}: {what} ({network_reason(exc) or _reason(exc)})")


def _kind(fs: Any, key: str) -> str | None:
    """``"file"``, ``"directory"`` or None (nothing there); a network failure is raised, never
    taken for a missing file (fsspec's ``isfile`` answers False to any error)."""
    try:
        info = fs.info(key)
    except FileNotFoundError:
        return None
    return str(info.get("type"))
