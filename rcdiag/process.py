"""The command-line process's edges: signals, a closed stdout, narrow terminal encodings, running
out of memory (README.md, "Exit codes").

* SIGTERM (and SIGHUP, unless ignored as ``nohup`` does) is handled as Ctrl-C is: the work stops,
  temporary files are removed (they are removed on any exception,
  :func:`rcdiag.io.writer.atomic_write`), one ``Error:`` line says so, and the exit code is 143
  (129 for SIGHUP, 130 for Ctrl-C).
* A reader that goes away (``rcdiag analyze … | head -1``) ends nothing: what is still printed is
  dropped, the run goes on (its output files are written) and exits with its own exit code.
* stdout and stderr never fail on a character their encoding lacks (``PYTHONIOENCODING=ascii``):
  it is written as a backslash escape.

Nothing here imports more than the standard library: it runs before the command's modules load.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

EXIT_INTERRUPTED = 130
"""128 + SIGINT."""
EXIT_TERMINATED = 143
"""128 + SIGTERM."""

START_UP_ADDRESS_SPACE = 384 << 20
"""The least address space (``ulimit -v``) rcdiag starts with: numpy, pyarrow and their threads
map about 300 MB before the first byte of a dump is read."""

THREAD_STACK = 2 << 20
"""Bytes of stack each new thread gets under an address-space limit."""

OUT_OF_MEMORY = (
    "out of memory: the process could not allocate what it needed (free memory, raise the "
    "memory limit, or analyse fewer steps with --steps)"
)
"""The one line printed when memory runs out (exit 2)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises :class:`KeyboardInterrupt`, so that the
    same clean-up runs."""

    exit_code = EXIT_TERMINATED

    def __str__(self) -> str:
        return "terminated (SIGTERM)"


class HungUp(KeyboardInterrupt):
    """SIGHUP (the terminal closed), handled as SIGTERM is; exit 129."""

    exit_code = 129

    def __str__(self) -> str:
        return "hung up (SIGHUP: the terminal closed)"


_interrupts: list[KeyboardInterrupt] = []
"""The interrupts received (SIGINT, SIGTERM), and whether one was reported."""
_printed: list[BaseException] = []
"""The interrupts whose line was printed, in order."""


def exit_code_of(interrupt: BaseException | None) -> int:
    """143 for SIGTERM, 130 for Ctrl-C."""
    return int(getattr(interrupt, "exit_code", EXIT_INTERRUPTED))


def printed_interrupts() -> int:
    """How many interrupt lines were printed so far (see :func:`report_interrupt`)."""
    return len(_printed)


def report_interrupt(
    interrupt: BaseException | None = None, *, unless_printed_since: int | None = None
) -> int:
    """Print the one ``Error:`` line of an interrupt (once, however many layers see it) and return
    its exit code.

    Args:
        interrupt: the exception; None: the last interrupt received (a layer that only saw the
            exit code 130).
        unless_printed_since: print nothing when an interrupt line was printed after
            :func:`printed_interrupts` returned this.
    """
    if interrupt is None:
        interrupt = _interrupts[-1] if _interrupts else KeyboardInterrupt()
    seen = any(interrupt is done for done in _printed)
    if unless_printed_since is not None and len(_printed) > unless_printed_since:
        seen = True
    if not seen:
        _printed.append(interrupt)
        print(f"Error: {str(interrupt) or 'interrupted'}", file=sys.stderr)
    return exit_code_of(interrupt)


def _terminate(signum: int, frame: FrameType | None) -> None:
    for handled in STOPPING_SIGNALS:  # clean-up runs once, undisturbed
        signal.signal(handled, signal.SIG_IGN)
    _interrupts.append(STOPPING_SIGNALS[signal.Signals(signum)]())
    raise _interrupts[-1]


STOPPING_SIGNALS: dict[signal.Signals, type[KeyboardInterrupt]] = {signal.SIGTERM: Terminated}
"""Signals that stop a run as Ctrl-C does, each with the exception it raises in the main thread
(SIGHUP only where it is not ignored: ``nohup`` keeps a run going)."""
if hasattr(signal, "SIGHUP"):
    STOPPING_SIGNALS[signal.SIGHUP] = HungUp


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _interrupts.append(KeyboardInterrupt())
    raise _interrupts[-1]


class QuietPipe:
    """A text stream that stops writing, silently, once its reader has gone (EPIPE): the rest is
    dropped, the process goes on. Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._close_pipe()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close_pipe()

    def _close_pipe(self) -> None:
        """From now on the descriptor writes to /dev/null (so that the final flush at exit finds
        no broken pipe either)."""
        self.broken = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def reader_gone(stream: Any) -> bool:
    """True once ``stream``'s reader has gone: a :class:`QuietPipe` that met EPIPE, or a pipe whose
    reading end is closed (``poll`` reports an error on the writing end; nothing is written to
    find out). A terminal, a file or an open pipe: False. For a command that would otherwise go
    on writing into nothing (``rcdiag watch … | head``)."""
    if getattr(stream, "broken", False):
        return True
    try:
        import select

        poller = select.poll()
        poller.register(stream.fileno(), 0)  # errors and hang-ups are reported whatever the mask
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no descriptor, no poll (Windows)
        return False


class StartUpMemory(MemoryError):
    """The address-space limit leaves too little room for rcdiag's libraries to load."""


def check_working_directory() -> str | None:
    """The one line for a current directory that no longer exists (removed under the shell), in
    which no relative path can be read or written; None when it exists."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return (
            "the current directory no longer exists (it was removed); cd to an existing directory"
        )
    except OSError:
        return None
    return None


def _address_space_limit() -> int | None:
    """The soft address-space limit (``ulimit -v``) in bytes, None when there is none."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def check_start_up_memory() -> None:
    """Refuse to start under an address-space limit below :data:`START_UP_ADDRESS_SPACE`: loading
    pyarrow's C++ libraries there fails inside their static initialisers, which abort the process
    (``std::bad_alloc``, exit 134) before any Python code can report it.

    Raises:
        StartUpMemory: naming the limit and what is needed.
    """
    limit = _address_space_limit()
    if limit is not None and limit < START_UP_ADDRESS_SPACE:
        raise StartUpMemory(
            f"out of memory: the address-space limit (ulimit -v) is {limit >> 20} MB, below the "
            f"{START_UP_ADDRESS_SPACE >> 20} MB rcdiag needs to start"
        )


def _few_malloc_arenas_under_a_memory_limit() -> None:
    """Under an address-space limit (``ulimit -v``), let glibc keep two malloc arenas instead of
    one per thread (each reserves 64 MB of address space): otherwise a reading thread's C++
    allocation fails with ``std::bad_alloc``, which aborts the process (exit 134) where a
    :class:`MemoryError` would have been one line."""
    try:
        import ctypes
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return
        libc = ctypes.CDLL("libc.so.6")
        m_arena_max = -8
        libc.mallopt(m_arena_max, 2)
        # threads' stacks: 2 MB each instead of the stack limit's 8 MB of address space
        attributes = ctypes.create_string_buffer(128)  # pthread_attr_t: 56 bytes on x86-64
        if libc.pthread_getattr_default_np(attributes) == 0:
            libc.pthread_attr_setstacksize(attributes, ctypes.c_size_t(THREAD_STACK))
            libc.pthread_setattr_default_np(attributes)
    except (ImportError, OSError, ValueError, AttributeError):  # not glibc, not POSIX
        return


def exhausted(exc: BaseException) -> str | None:
    """The one line for an error that is the machine running out of something (memory, shared
    library mappings under a memory limit, file handles), else None."""
    text = str(exc)
    if isinstance(exc, StartUpMemory):
        return text
    if isinstance(exc, MemoryError) or "bad_alloc" in text or "Cannot allocate memory" in text:
        return OUT_OF_MEMORY
    if isinstance(exc, ImportError) and "failed to map segment" in text:
        return OUT_OF_MEMORY
    if "can't start new thread" in text:  # a thread's stack could not be mapped
        return OUT_OF_MEMORY
    if "Too many open files" in text:
        return "too many open files: the limit of open files (`ulimit -n`) is reached"
    return None


def prepare() -> None:
    """Set the process up for a command-line run (idempotent): SIGTERM raises :class:`Terminated`,
    stdout survives its reader going away, and neither stream fails on an unencodable character.
    """
    _few_malloc_arenas_under_a_memory_limit()
    if threading.current_thread() is threading.main_thread():
        for stopping in STOPPING_SIGNALS:
            if stopping == signal.SIGTERM or signal.getsignal(stopping) == signal.SIG_DFL:
                signal.signal(stopping, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")
    if not isinstance(sys.stdout, QuietPipe) and sys.stdout is not None:
        sys.stdout = QuietPipe(sys.stdout)  # type: ignore[assignment,unused-ignore]


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the block runs (they are delivered when it ends): a step
    that must not be cut in two, such as creating a temporary file and remembering its name."""
    if not hasattr(signal, "pthread_sigmask") or (
        threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    held = {signal.SIGINT, *STOPPING_SIGNALS}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
