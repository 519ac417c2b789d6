"""Bounded waits on the network: connect and read timeouts for every remote file system, and
network failures named as such (docs/python-api.md, "Remote dumps").

Two storage options, read by rcdiag and never handed to the file system as such, set them:
``connect_timeout`` (seconds to open a connection, default :data:`CONNECT_TIMEOUT`) and
``read_timeout`` (seconds without a byte of an answer, default :data:`READ_TIMEOUT`); on the
command line ``--storage-option read_timeout=30``. Each backend gets them in its own form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rcdiag.errors import UsageError

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection to a remote store or web server."""
READ_TIMEOUT = 60.0
"""Seconds to wait for the next bytes of an answer."""

NETWORK_ATTEMPTS = 2
"""Attempts of a request to an object store (s3://) before its failure is reported."""

TIMEOUT_KEYS = ("connect_timeout", "read_timeout")


def _seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
        raise UsageError(f"storage option {key}={value!r}: expected seconds, a number > 0")
    return float(value)


def with_timeouts(protocol: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` for the file system of ``protocol`` with connect and read timeouts added in the
    backend's own form (the user's own settings of the backend win)."""
    connect = _seconds(options, "connect_timeout", CONNECT_TIMEOUT)
    read = _seconds(options, "read_timeout", READ_TIMEOUT)
    out = {k: v for k, v in options.items() if k not in TIMEOUT_KEYS}
    if protocol in ("http", "https"):
        import aiohttp

        client = dict(out.get("client_kwargs") or {})
        client.setdefault(
            "timeout", aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
        )
        out["client_kwargs"] = client
    elif protocol == "s3":
        config = dict(out.get("config_kwargs") or {})
        config.setdefault("connect_timeout", connect)
        config.setdefault("read_timeout", read)
        # a few attempts, not botocore's five times s3fs's five: a silent endpoint stays bounded
        config.setdefault("retries", {"max_attempts": NETWORK_ATTEMPTS, "mode": "standard"})
        out["config_kwargs"] = config
    elif protocol == "gs":
        import aiohttp

        session = dict(out.get("session_kwargs") or {})
        session.setdefault(
            "timeout", aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
        )
        out["session_kwargs"] = session
    return out


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_TIMEOUT_NAMES = ("ConnectTimeoutError", "ReadTimeoutError", "ServerTimeoutError", "Timeout")
_CONNECT_NAMES = (
    "EndpointConnectionError",
    "ClientConnectorError",
    "ClientConnectionError",
    "ServerDisconnectedError",
    "ClientOSError",
    "ConnectionClosedError",
)


def network_reason(exc: BaseException) -> str | None:
    """What went wrong when ``exc`` (or an exception it was raised from) is a network failure:
    ``"network timeout: …"`` or ``"network failure: …"``; None for anything else."""
    import asyncio  # here: asyncio is ~0.02 s of a start-up that reads no remote file
    import socket

    for cause in _chain(exc):
        name = type(cause).__name__
        text = str(cause).strip().splitlines()[0] if str(cause).strip() else name
        if isinstance(cause, (TimeoutError, asyncio.TimeoutError, socket.timeout)) or any(
            n in name for n in _TIMEOUT_NAMES
        ):
            return (
                f"network timeout: no answer in time ({name}; the storage options "
                "connect_timeout and read_timeout set the limits)"
            )
        if isinstance(cause, (ConnectionError, socket.gaierror)) or name in _CONNECT_NAMES:
            return f"network failure: {name}: {text}"
    return None


def bound_retries(fs: Any) -> None:
    """Let a file system that retries failed requests on its own (s3fs: five times, each with
    botocore's own attempts) try :data:`NETWORK_ATTEMPTS` times."""
    if type(fs).__module__.startswith("s3fs") and isinstance(getattr(fs, "retries", None), int):
        fs.retries = min(fs.retries, NETWORK_ATTEMPTS)
