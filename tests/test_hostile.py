"""Hostile inputs, environments and signals, one row each: what the case builds, the command (or
Python call), the exit code (or exception) and message expected. Every case also checks that no
input changed (sha256) and that nothing but the expected outputs was left behind — no temporary
file, no partial output. The next failure found is one more row.

Cases that need a process of their own (signals, resource limits, an environment, a closed pipe)
run ``rcdiag`` as a subprocess, with limits set in the child only (``preexec_fn``); the others run
in-process.
"""

# ruff: noqa: E501  (the tables keep one case to a line or two)
from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.errors import UsageError
from tests.hostile_builders import (
    Builder,
    Built,
    baseline_with,
    big_dump,
    dump,
    many_files,
    odd_uids,
    results_with,
    silent_server,
    snapshot,
    text_file,
    unused_port,
    with_entry,
)

ENTRY = "from rcdiag.entry import main; main()"
LONG_NAME = "n" * 250 + ".json"  # 250 bytes: the temporary name beside it would be 264
EXHAUSTED_OR_TIMEOUT = 90  # seconds any subprocess case may take: nothing hangs


@dataclass(frozen=True)
class CliCase:
    """One hostile command line. ``args`` may name the builder's paths (``{dump}``), ``{tmp}``,
    ``{port}`` (a server that never answers) and ``{closed}`` (a port nothing listens on)."""

    id: str
    build: Builder
    args: tuple[str, ...]
    code: int
    message: str = ""
    """A regex the one ``Error:`` line (or, for exit 0, stdout) must match."""
    outputs: tuple[str, ...] = ()
    """Files (relative to tmp_path) the run leaves; nothing else may appear."""
    env: dict[str, str] = field(default_factory=dict)
    limits: tuple[tuple[int, int], ...] = ()
    """Resource limits of the child process (resource.RLIMIT_*, value)."""
    signal: int | None = None
    """Sent once a temporary file appears under ``{tmp}/out``."""
    head: bool = False
    """Read one line of stdout, then close it (``| head -1``)."""
    patch: Callable[[pytest.MonkeyPatch, Built], None] | None = None
    removed_cwd: bool = False
    """Run in a current directory removed under the process."""

    @property
    def own_process(self) -> bool:
        special = self.env or self.limits or self.signal or self.head or self.removed_cwd
        return bool(special or "{port}" in self.args)


def _unlistable(name: str) -> Callable[[pytest.MonkeyPatch, Built], None]:
    """Make the directory ``name`` of the dump unlistable, as ``chmod 000`` does for non-root."""

    def patch(monkeypatch: pytest.MonkeyPatch, built: Built) -> None:
        real = os.scandir

        def scandir(path: Any = ".") -> Any:
            if str(path).endswith(name):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)

        monkeypatch.setattr(os, "scandir", scandir)

    return patch


DEEP_TOML = "a = " + "[" * 3000 + "]" * 3000 + "\n"
NONFINITE = "is (Infinity|-Infinity|NaN); rcdiag reads finite numbers only"

CLI_CASES = [
    # 1. an input read in part is an error, never a partial result
    CliCase("unlistable-subdirectory", dump, ("analyze", "{dump}"), 2,
            r"step=1: cannot list the directory \(Permission denied\)",
            patch=_unlistable("step=1")),
    CliCase("dangling-link-in-dump", with_entry("dangling"), ("analyze", "{dump}"), 2,
            r"part-1\.parquet: is a broken symbolic link, not a parquet file; the dump would be read in part"),
    CliCase("fifo-in-dump", with_entry("fifo"), ("analyze", "{dump}"), 2, r"part-1\.parquet: is a FIFO"),
    # 2. non-finite numbers in documents rcdiag reads (and in flags)
    CliCase("veto-infinite", dump, ("analyze", "{dump}", "--veto-threshold", "inf"), 2,
            r"--veto-threshold must be a finite number"),
    CliCase("grid-infinite", dump, ("compare-presets", "{dump}", "--sweep", "seq_mean_k1", "--grid", "inf"), 2,
            r"--grid value 'inf': a threshold must be a finite number"),
    CliCase("baseline-infinity", baseline_with("Infinity"),
            ("check", "{dump}", "--baseline", "{baseline}"), 2, r"baseline\.json: field overall\.\"rollout_corr/k3_kl\" " + NONFINITE),
    CliCase("baseline-nan", baseline_with("NaN"),
            ("check", "{dump}", "--baseline", "{baseline}"), 2, NONFINITE),
    CliCase("baseline-overflow", baseline_with("1e999"),
            ("check", "{dump}", "--baseline", "{baseline}"), 2, NONFINITE),
    CliCase("results-infinity", results_with("-Infinity"),
            ("report", "--from", "{results}", "-o", "{tmp}/r.html"), 2,
            r"results\.json: field overall\.\"rollout_corr/kl\" " + NONFINITE),
    CliCase("rules-inf", text_file("rules.toml", 'rel_tol = inf\nrules = ["rollout_corr/kl.overall < 1"]\n'),
            ("check", "{dump}", "--rules", "{rules}"), 2, r"rules\.toml: field rel_tol " + NONFINITE),
    CliCase("config-inf", text_file("mine.yaml", "rollout_is: token\nrollout_is_threshold: .inf\n"),
            ("compare-presets", "{dump}", "-c", "{mine}"), 2, r"mine\.yaml: field rollout_is_threshold"),
    CliCase("rules-nested", text_file("rules.toml", DEEP_TOML),
            ("check", "{dump}", "--rules", "{rules}"), 2, r"rules\.toml: not a rules file \(TOML nested"),
    # 5. an output the next run would read as input
    CliCase("json-in-dump", dump, ("analyze", "{dump}", "--json", "{dump}/extra.parquet"), 2,
            r"--json .*extra\.parquet is inside .*a directory of the dump"),
    CliCase("html-in-dump", dump, ("analyze", "{dump}", "--html", "{dump}/step=0/r.pq"), 2,
            r"--html .* is inside"),
    CliCase("report-in-dump", dump, ("report", "{dump}", "-o", "{dump}/r.parquet"), 2, r"--output .* is inside"),
    CliCase("junit-in-dump", dump, ("check", "{dump}", "--junit", "{dump}/j.parquet"), 2, r"--junit .* is inside"),
    CliCase("markdown-in-dump", dump, ("check", "{dump}", "--markdown", "{dump}/m.parquet"), 2,
            r"--markdown .* is inside"),
    CliCase("baseline-in-dump", dump, ("baseline", "{dump}", "-o", "{dump}/b.parq"), 2, r"--output .* is inside"),
    CliCase("recommend-in-dump", dump, ("recommend", "{dump}", "-o", "{dump}/r.parquet"), 2, r"--output .* is inside"),
    CliCase("output-matches-glob", dump, ("analyze", "{dump}/*/*.parquet", "--json", "{dump}/step=0/x.parquet"), 2,
            r"matches .*a pattern of the dump"),
    # 6. file handles: 1,200 files under a limit of 128 open files
    CliCase("1200-files-few-handles", many_files, ("analyze", "{dump}", "-q"), 0,
            limits=((resource.RLIMIT_NOFILE, 128),)),
    # 7. the network: a server that never answers, a port nobody listens on
    CliCase("silent-server", dump, ("analyze", "http://127.0.0.1:{port}/run.parquet", "--storage-option",
            "read_timeout=1", "--storage-option", "connect_timeout=1"), 2, r"network timeout"),
    CliCase("silent-s3-endpoint", dump, ("analyze", "s3://bucket/run/", "--storage-option", "endpoint_url=http://127.0.0.1:{port}",
            "--storage-option", "read_timeout=1", "--storage-option", "connect_timeout=1"), 2, r"network timeout",
            env={"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}),
    CliCase("refused-connection", dump, ("analyze", "http://127.0.0.1:{closed}/run.parquet"), 2,
            r"network failure: .*Cannot connect|network failure"),
    CliCase("flag-named-on-the-command-line", dump, ("analyze", "{dump}", "--steps", "a:b"), 2, r"^Error: --steps 'a:b': expected A:B"),
    CliCase("veto-flag-named", dump, ("analyze", "{dump}", "--veto-threshold", "0"), 2, r"^Error: --veto-threshold must be > 0"),
    CliCase("bad-timeout", dump, ("analyze", "http://127.0.0.1:{closed}/r.parquet", "--storage-option",
            "read_timeout=-1"), 2, r"storage option read_timeout=-1: expected seconds"),
    # 8. memory
    CliCase("address-space-300mb", dump, ("analyze", "{dump}"), 2, r"out of memory",
            limits=((resource.RLIMIT_AS, 300 << 20),)),
    # 9. narrow encodings
    CliCase("ascii-stdout", dump, ("analyze", "{dump}"), 0, r"rollout_corr/k3_kl", env={"PYTHONIOENCODING": "ascii"}),
    CliCase("latin1-stdout", dump, ("recommend", "{dump}"), 0, r"", env={"PYTHONIOENCODING": "latin-1"}),
    # 11. signals and a closed pipe
    CliCase("sigterm-while-writing", big_dump, ("synth", "{tmp}/out/s.parquet", "--steps", "200",
            "--rows-per-step", "256", "--mean-length", "256"), 143, r"terminated \(SIGTERM\)",
            signal=signal.SIGTERM),
    CliCase("sigint-while-writing", big_dump, ("synth", "{tmp}/out/s.parquet", "--steps", "200",
            "--rows-per-step", "256", "--mean-length", "256"), 130, r"^Error: interrupted$",
            signal=signal.SIGINT),
    CliCase("sighup-while-writing", big_dump, ("synth", "{tmp}/out/s.parquet", "--steps", "200",
            "--rows-per-step", "256", "--mean-length", "256"), 129, r"hung up \(SIGHUP",
            signal=signal.SIGHUP),
    CliCase("closed-stdout", dump, ("analyze", "{dump}", "--json", "{tmp}/r.json"), 0, head=True,
            outputs=("r.json",)),
    CliCase("removed-current-directory", dump, ("analyze", "{dump}", "--json", "r.json"), 2,
            r"the current directory no longer exists", removed_cwd=True),
    # 12. the longest file names
    CliCase("255-byte-output-name", dump, ("analyze", "{dump}", "--json", "{tmp}/" + LONG_NAME, "-q"), 0,
            outputs=(LONG_NAME,)),
]  # fmt: skip


def _fill(args: tuple[str, ...], names: dict[str, Any]) -> list[str]:
    return [a.format(**names) for a in args]


def _own_process(case: CliCase, args: list[str], tmp: Path) -> tuple[int, str, str]:
    def limit() -> None:
        # a test runner's workers may ignore or block SIGINT, and children inherit both
        for default in (signal.SIGINT, signal.SIGHUP):
            signal.signal(default, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        for which, value in case.limits:
            resource.setrlimit(which, (value, value))
        if case.removed_cwd:
            (tmp / "gone").mkdir()
            os.chdir(tmp / "gone")
            os.rmdir(tmp / "gone")

    env = {**os.environ, **case.env}
    child = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=limit,
    )
    if case.signal is not None:
        deadline = time.monotonic() + EXHAUSTED_OR_TIMEOUT
        while not list((tmp / "out").glob(".*.tmp")) and child.poll() is None:
            assert time.monotonic() < deadline, "no temporary file appeared"
            time.sleep(0.005)
        child.send_signal(case.signal)
    if case.head:
        assert child.stdout is not None
        child.stdout.readline()
        child.stdout.close()
        child.stdout = None
    stdout, stderr = child.communicate(timeout=EXHAUSTED_OR_TIMEOUT)
    return (
        child.returncode,
        (stdout or b"").decode(errors="replace"),
        stderr.decode(errors="replace"),
    )


@contextlib.contextmanager
def _ports(case: CliCase) -> Iterator[dict[str, int]]:
    if "{port}" not in " ".join(case.args):
        yield {"closed": unused_port()}
        return
    with silent_server() as port:
        yield {"port": port}


@pytest.mark.parametrize("case", CLI_CASES, ids=lambda c: c.id)
def test_hostile_command_line(
    case: CliCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = case.build(tmp_path)
    before = snapshot(tmp_path)
    with _ports(case) as ports:
        args = _fill(case.args, {**built, **ports, "tmp": tmp_path})
        if case.patch is not None:
            case.patch(monkeypatch, built)
        started = time.monotonic()
        if case.own_process:
            code, stdout, stderr = _own_process(case, args, tmp_path)
            for _ in range(3):  # a fast or loaded machine may end the write before the signal lands
                if not (case.signal and code == 0 and not list((tmp_path / "out").glob(".*"))):
                    break
                for written in (tmp_path / "out").iterdir():
                    written.unlink()
                code, stdout, stderr = _own_process(case, args, tmp_path)
        else:
            done = CliRunner().invoke(app, args)
            code, stdout, stderr = done.exit_code, done.stdout, done.stderr
        monkeypatch.undo()
    assert time.monotonic() - started < EXHAUSTED_OR_TIMEOUT
    assert code == case.code, (stdout[-2000:], stderr[-2000:])
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if case.code != 0:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
        assert re.search(case.message, lines[0]), lines[0]
    else:
        assert re.search(case.message, stdout), stdout[-2000:]
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before, "an input changed"
    assert sorted(set(after) - set(before)) == sorted(case.outputs), "stray or missing files"


def test_uids_reach_the_page_escaped_and_cut(tmp_path: Path) -> None:
    built = odd_uids(tmp_path)
    before = snapshot(tmp_path / "in")
    done = CliRunner().invoke(app, ["report", str(built["dump"]), "-o", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    for raw in ("\x00", "\x1b", "\u202e"):
        assert raw not in page
    assert "a\\x00b" in page and "d\\u202eevil" in page
    assert "u" * 79 + "…" in page and "u" * 80 not in page and len(page) < 4 << 20  # cut
    assert snapshot(tmp_path / "in") == before


def test_an_interrupt_while_the_modules_load_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C during start-up, made exact: importing the command line raises KeyboardInterrupt."""
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'rcdiag.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n" + ENTRY
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "analyze", "x"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (130, "Error: interrupted\n")


@dataclass(frozen=True)
class ApiCase:
    """One hostile Python call: ``call(built)`` raises ``error`` matching ``message`` (which names
    the Python argument), or, with ``error`` None, returns a value ``accepted`` holds true of."""

    id: str
    call: Callable[[Built], Any]
    error: type[BaseException] | None
    message: str = ""
    accepted: Callable[[Any], bool] = lambda _: True
    build: Builder = dump


B = np.zeros((2, 3))
NAN_MASK = np.array([[1.0, np.nan, 1.0], [1.0, 1.0, 0.0]])


def _torch() -> Any:
    return pytest.importorskip("rcdiag.torch")


API_CASES = [
    ApiCase("column-type", lambda b: rcdiag.analyze(b["dump"], rollout_col=5), TypeError, r"^rollout_col must be a string"),
    ApiCase("flag-type", lambda b: rcdiag.analyze(b["dump"], drop_nonfinite="yes"), TypeError, r"^drop_nonfinite must be True or False"),
    ApiCase("paths-type", lambda b: rcdiag.analyze(5), TypeError, r"^paths must be a path"),
    ApiCase("step-type", lambda b: rcdiag.analyze(b["dump"], step="3"), TypeError, r"^step must be an integer"),
    ApiCase("steps-type", lambda b: rcdiag.analyze(b["dump"], steps=[1, 2]), TypeError, r'^steps must be a string "A:B"'),
    ApiCase("storage-options-type", lambda b: rcdiag.analyze(b["dump"], storage_options=[1]), TypeError, r"^storage_options must be a mapping"),
    ApiCase("dialect-value", lambda b: rcdiag.analyze(b["dump"], dialect="newest"), ValueError, r"^dialect 'newest': expected one of latest, legacy"),
    ApiCase("engine-value", lambda b: rcdiag.analyze(b["dump"], engine="spark"), ValueError, r"^engine 'spark'"),
    ApiCase("veto-nan", lambda b: rcdiag.analyze(b["dump"], veto_threshold=float("nan")), ValueError, r"^veto_threshold must be a finite number"),
    ApiCase("veto-zero", lambda b: rcdiag.analyze(b["dump"], veto_threshold=0.0), ValueError, r"^veto_threshold must be > 0"),
    ApiCase("steps-value", lambda b: rcdiag.analyze(b["dump"], steps="a:b"), UsageError, r"^steps 'a:b': expected A:B"),
    ApiCase("frameworks-value", lambda b: rcdiag.analyze(b["dump"], frameworks="bogus"), UsageError, r"^frameworks: unknown framework 'bogus'"),
    ApiCase("sweep-value", lambda b: rcdiag.compare_presets(b["dump"], sweep="bogus"), UsageError, r"^sweep 'bogus' is not available"),
    ApiCase("confidence-value", lambda b: rcdiag.check(b["dump"], confidence=2.0), ValueError, r"^confidence must be strictly between 0 and 1"),
    ApiCase("inline-config-infinite", lambda b: rcdiag.compare_presets(b["dump"], configs={"m": {"rollout_is": "token", "rollout_is_threshold": float("inf")}}),
            ValueError, r"^configs: m\.rollout_is_threshold is Infinity"),
    ApiCase("torch-config-nan", lambda b: _torch().preset_metrics({"rollout_is": "token", "rollout_is_threshold": float("nan")}, B, B), ValueError, r"rollout_is_threshold is NaN"),
    ApiCase("top-type", lambda b: rcdiag.report(b["dump"], top="5"), TypeError, r"^top must be an integer"),
    ApiCase("replicates-type", lambda b: rcdiag.baseline(b["dump"], replicates=2.5), TypeError, r"^replicates must be an integer"),
    ApiCase("seed-value", lambda b: rcdiag.baseline(b["dump"], seed=-1), ValueError, r"^seed must be ≥ 0"),
    ApiCase("rule-type", lambda b: rcdiag.check(b["dump"], rules=[5]), TypeError, r"^rules\[0\] must be a string"),
    ApiCase("one-rule-as-str", lambda b: rcdiag.check(b["dump"], rules="rollout_corr/k3_kl.overall < 1"), None,
            accepted=lambda r: r.passed and r.rules.height == 1),
    ApiCase("one-preset-as-str", lambda b: rcdiag.compare_presets(b["dump"], presets="decoupled_geo_rs"), None,
            accepted=lambda r: list(r.overall) == ["decoupled_geo_rs"]),
    ApiCase("baseline-infinity", lambda b: rcdiag.check(b["dump"], baseline=b["baseline"]), UsageError, NONFINITE,
            build=baseline_with("Infinity")),
    ApiCase("report-result-type", lambda b: rcdiag.write_report(5, b["dump"].parent / "r.html"), TypeError, r"^result must be the result"),
    ApiCase("report-path-type", lambda b: rcdiag.write_report(rcdiag.analyze(b["dump"]), 5), TypeError, r"^output must be a path"),
    ApiCase("dump-compression", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", B, B, compression="bogus"),
            ValueError, r"^compression 'bogus': expected one of"),
    ApiCase("dump-replaces-log-probs", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", B, B, extra_columns={"old_log_probs": B[:, 0]}),
            ValueError, r"^extra_columns: 'old_log_probs' is a column write_dump writes itself"),
    ApiCase("dump-replaces-step", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", B, B, extra_columns={"step": [1, 2]}),
            ValueError, r"^extra_columns: 'step'"),
    ApiCase("dump-ragged", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", [[1.0, 2.0], [3.0]], B), ValueError, r"^rollout_log_probs: not a rectangular array"),
    ApiCase("dump-step-type", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", B, B, step="x"), TypeError, r"^step must be an integer"),
    ApiCase("dump-nan-mask", lambda b: rcdiag.write_dump(b["dump"].parent / "w.parquet", B, B, NAN_MASK), ValueError, r"^response_mask is float64 and holds nan at row 0, position 1"),
    ApiCase("torch-dialect", lambda b: _torch().offpolicy_metrics(B, B, dialect="newest"), ValueError, r"^dialect 'newest'"),
    ApiCase("torch-nan-mask", lambda b: _torch().offpolicy_metrics(B, B, NAN_MASK), ValueError, r"^response_mask is float64"),
    ApiCase("torch-preset-type", lambda b: _torch().preset_metrics(5, B, B), TypeError, r"^preset_or_config must be"),
    ApiCase("torch-one-preset-as-str", lambda b: _torch().Monitor("decoupled_geo_rs").configurations, None,
            accepted=lambda names: names == ["decoupled_geo_rs"]),
    ApiCase("writer-compression", lambda b: _torch().DumpWriter(b["dump"].parent / "w", compression="zip"), ValueError, r"^compression 'zip'"),
]  # fmt: skip


@pytest.mark.parametrize("case", API_CASES, ids=lambda c: c.id)
def test_hostile_python_call(case: ApiCase, tmp_path: Path) -> None:
    built = case.build(tmp_path)
    before = snapshot(tmp_path)
    if case.error is None:
        assert case.accepted(case.call(built))
    else:
        with pytest.raises(case.error, match=case.message):
            case.call(built)
    assert snapshot(tmp_path) == before, "an input changed or a file was left"


def test_every_interrupted_run_of_a_process_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process runs (a notebook, a test) each print their own line, Ctrl-C and SIGTERM alike."""
    from rcdiag import api
    from rcdiag.process import Terminated

    built = dump(tmp_path)
    for raised, code, line in [
        (KeyboardInterrupt(), 130, "Error: interrupted"),
        (KeyboardInterrupt(), 130, "Error: interrupted"),
        (Terminated(), 143, "Error: terminated (SIGTERM)"),
    ]:

        def interrupted(*args: Any, exc: BaseException = raised, **kwargs: Any) -> Any:
            raise exc

        monkeypatch.setattr(api, "analyze", interrupted)
        done = CliRunner().invoke(app, ["analyze", str(built["dump"])])
        assert (done.exit_code, done.stderr.strip()) == (code, line)
