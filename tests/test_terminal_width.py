"""Terminal output fits its width: 80 columns (``COLUMNS=80``), and 100 when piped without COLUMNS.

Every command runs on the sample dumps; no line of stdout or stderr may be wider than the width,
and no name or number may be cut with an ellipsis (a ``…`` is only ever the range sign of a sentence,
with a space on each side). Also: the help, ``-V``, and what each view says.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag import __version__
from rcdiag.cli import app
from rcdiag.commands import analyze, check, compare_presets, recommend, report
from rcdiag.commands._console import PIPE_WIDTH
from rcdiag.commands._help import reflowed

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "sample_data" / "drift"
HEAVY = ROOT / "sample_data" / "heavy_tails.parquet"
FP8 = ROOT / "sample_data" / "fp8.parquet"
TOPP = ROOT / "sample_data" / "model" / "topp"  # a dump bug: processed log-probs

runner = CliRunner()

COMMANDS: dict[str, list[str]] = {
    "analyze drift": ["analyze", str(DRIFT)],
    "analyze legacy": ["analyze", str(DRIFT), "--dialect", "legacy"],
    "analyze dump bug": ["analyze", str(TOPP)],
    "compare-presets drift": ["compare-presets", str(DRIFT)],
    "compare-presets sweep": ["compare-presets", str(FP8), "--sweep", "seq_mean_k1"],
    "compare-presets dump bug": ["compare-presets", str(TOPP), "-p", "disabled"],
    "presets": ["presets"],
    "presets legacy": ["presets", "--dialect", "legacy"],
    "check drift": ["check", str(DRIFT)],
    "check baseline": ["check", str(FP8), "--baseline", "base.json"],
    "recommend drift": ["recommend", str(DRIFT), "-o", "rc.yaml"],
    "recommend heavy tails": ["recommend", str(HEAVY)],
    "recommend legacy": ["recommend", str(HEAVY), "--dialect", "legacy"],
    "recommend dump bug": ["recommend", str(TOPP), "-o", "rc.yaml"],
    "baseline": ["baseline", str(DRIFT), "-o", "b.json"],
    "report": ["report", str(HEAVY), "-o", "r.html"],
    "analyze frameworks": ["analyze", str(DRIFT), "--frameworks", "all"],
    "compare-presets frameworks": ["compare-presets", str(DRIFT), "--framework", "trl,slime"],
    "presets frameworks": ["presets", "--framework", "trl,slime,openrlhf,nemo_rl"],
    "recommend trl": ["recommend", str(DRIFT), "--framework", "trl"],
    "recommend slime": ["recommend", str(HEAVY), "--framework", "slime"],
    "recommend openrlhf": ["recommend", str(DRIFT), "--framework", "openrlhf"],
}
WIDTHS = {"COLUMNS=80": ("80", 80), "piped": (None, PIPE_WIDTH)}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a baseline of the fp8 dump (outputs are written here, short paths)."""
    path = tmp_path_factory.mktemp("width")
    done = runner.invoke(app, ["baseline", str(FP8), "-o", str(path / "base.json"), "-q"])
    assert done.exit_code == 0, done.stderr
    return path


@pytest.fixture
def inside(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(workdir)
    yield workdir


def run(args: list[str], columns: str | None) -> tuple[int, str, str]:
    result = runner.invoke(app, args, env={"COLUMNS": columns})
    return result.exit_code, result.stdout, result.stderr


def cut_off(text: str) -> list[str]:
    """Lines holding an ellipsis that is not a range sign between two spaces."""
    return [line for line in text.splitlines() if re.search(r"\S…|…\S|…$", line)]


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_fits_the_width_and_cuts_nothing(
    inside: Path, command: str, width: str
) -> None:
    columns, limit = WIDTHS[width]
    code, out, err = run(COMMANDS[command], columns)
    assert code in (0, 1), err  # check exits 1 when a rule fails
    assert out.strip()
    for stream in (out, err):
        wide = [line for line in stream.splitlines() if len(line) > limit]
        assert not wide, f"{command}: lines wider than {limit}:\n" + "\n".join(wide)
        assert not cut_off(stream), f"{command}: cut with an ellipsis:\n" + "\n".join(
            cut_off(stream)
        )


def test_columns_is_honoured_when_wider(inside: Path) -> None:
    code, out, _ = run(["analyze", str(DRIFT)], "200")
    assert code == 0
    assert re.search(r"^Per step *$", out, re.MULTILINE) and "part 1 of" not in out  # one table
    assert max(len(line) for line in out.splitlines()) > PIPE_WIDTH


def test_narrow_tables_are_split_and_repeat_their_key(inside: Path) -> None:
    _, out, _ = run(["analyze", str(DRIFT)], "80")
    assert "Per step (part 1 of 2)" in out and "Per step (part 2 of 2)" in out
    second = out.split("Per step (part 2 of 2)")[1]
    assert re.search(r"^\s*19\s", second, re.MULTILINE)  # the step is in every part
    _, out, _ = run(["compare-presets", str(DRIFT)], "80")
    assert "Configurations (overall, part 1 of 2)" in out
    for name in ("decoupled_geo_rs_token_tis", "bypass_pg_geo_rs_seq_tis"):
        assert name in out.split("part 2 of 2")[1]  # names are never cut


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
@pytest.mark.parametrize("columns", ["80", "100"])
def test_every_band_is_read_whole_on_one_line(inside: Path, dialect: str, columns: str) -> None:
    """Each band (``watch if |kl| > 0.001``) of each judged metric stands whole on one line,
    beside its metric's name: never broken a word (or a letter) per line beside a long metric
    name such as the legacy dialect's ``rollout_corr/rollout_is_catastrophic_token_fraction``."""
    from rcdiag.commands._terminal import band_words

    code, out, _ = run(["analyze", str(DRIFT), "--dialect", dialect], columns)
    assert code == 0
    overall = out.split("Per step")[0]
    lines = overall.splitlines()
    named = {line.split()[0]: i for i, line in enumerate(lines) if line.startswith("r")}
    statuses = ("healthy", "watch", "act")
    judged = [
        line.split()[0]
        for line in lines
        if line[:1] == "r" and line.split()[2:3] in [[s] for s in statuses]
    ]
    assert len(judged) >= 8
    for name in judged:
        bands = band_words(name).split(", ")
        at = max(i for n, i in named.items() if n == name)  # the last table naming it: the bands'
        block = lines[at : at + len(bands)]
        for band in bands:
            assert any(band in line for line in block), (name, band, block)


def test_analyze_says_what_each_band_limits(inside: Path) -> None:
    _, out, _ = run(["analyze", str(DRIFT)], "100")
    kl = next(line for line in out.splitlines() if line.startswith("rollout_corr/kl "))
    k3 = next(line for line in out.splitlines() if line.startswith("rollout_corr/k3_kl "))
    assert "watch if > 0.001, act if > 0.1" in k3
    # kl and k3_kl estimate the same KL: one scale, one status
    assert "watch if |kl| > 0.001, act if |kl| > 0.1" in kl
    assert kl.split()[2] == k3.split()[2] == "watch"
    # drift has negative χ² values: the note says why they can be
    assert "negative when the sampled weights average below 1" in " ".join(out.split())


def test_no_chi2_note_without_a_negative_chi2(inside: Path) -> None:
    _, out, _ = run(["analyze", str(HEAVY)], "100")
    overall = out.split("Per step")[0]
    chi2 = [float(line.split()[1]) for line in overall.splitlines() if "/chi2_" in line]
    if all(value >= 0 for value in chi2):
        assert "sampled weights average below 1" not in out


def test_compare_presets_marks_the_recommendation_and_explains_columns(inside: Path) -> None:
    _, out, _ = run(["compare-presets", str(FP8)], "120")
    picked = runner.invoke(app, ["recommend", str(FP8)]).stdout
    name = re.search(r"Recommended: (\S+)", picked)
    assert name is not None
    marked = [line.split()[0] for line in out.splitlines() if compare_presets.MARK in line]
    assert name[1] in marked  # the row rcdiag recommend picks, read from the library
    flat = " ".join(out.split())
    assert "IS mass cut: share of the IS weight mass truncation removes" in flat
    assert f"{compare_presets.MARK} recommended for this dump" in flat


def test_worst_steps_leave_out_configurations_that_change_nothing(inside: Path) -> None:
    _, out, _ = run(["compare-presets", str(DRIFT)], "200")
    worst = out.split("Worst step of each figure")[1]
    assert "100.00% @0" not in worst and "0.00% @0" not in worst
    assert not re.search(r"^disabled\s", worst, re.MULTILINE)
    assert "No change at any step (left out above): bypass_ppo_clip, disabled." in out
    assert "no change" in worst  # a figure a configuration never moves


def test_check_shows_severity_apart_and_counts_in_words(inside: Path) -> None:
    _, out, _ = run(["check", str(HEAVY), "--rule", "warn: rcdiag/ess_seq.overall >= 0.5"], "100")
    assert "warn: rcdiag" not in out
    row = next(line for line in out.splitlines() if "rcdiag/ess_seq.overall >= 0.5" in line)
    assert row.split()[:2] in (["PASS", "warn"], ["WARN", "warn"])
    _, out, _ = run(["check", str(HEAVY), "--rule", "rcdiag/ess_token.overall >= 0"], "100")
    assert "PASSED: 1 rule · 1 pass" in out


@pytest.mark.parametrize(
    "rule", ["rollout_corr/k3_kl.overall < 1", "rollout_corr/k3_kl.rise <= 10"]
)
def test_check_rules_are_never_cut(inside: Path, rule: str) -> None:
    _, out, _ = run(["check", str(DRIFT), "--rule", rule], "80")
    assert any(rule in line for line in out.splitlines())  # overall and rise told apart


def test_recommend_names_the_configuration_in_verl_keys(inside: Path) -> None:
    _, out, _ = run(["recommend", str(FP8)], "100")
    assert "algorithm.rollout_correction.rollout_is=token rollout_is_threshold=2.0" in out


# --- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("analyze", analyze.analyze),
        ("report", report.report),
        ("check", check.check),
        ("recommend", recommend.recommend),
    ],
)
def test_help_paragraphs_break_only_at_the_width(name: str, command: object) -> None:
    help_text = runner.invoke(app, [name, "--help"], env={"COLUMNS": "250"}).stdout
    lines = [" ".join(line.strip(" │").split()) for line in help_text.splitlines()]
    for paragraph in reflowed(inspect.getdoc(command)).split("\n\n"):
        assert paragraph in lines, paragraph  # one line when the width allows it


HELPS = [
    "analyze",
    "compare-presets",
    "report",
    "check",
    "baseline",
    "recommend",
    "presets",
    "synth",
]


@pytest.mark.parametrize("args", [["--help"], *[[c, "--help"] for c in HELPS]])
def test_options_show_what_they_take_and_no_python_type(args: list[str]) -> None:
    help_text = runner.invoke(app, args, env={"COLUMNS": "100"}).stdout
    assert "--help" in help_text
    python_types = re.findall(r"<(?:bool|str|int|float|path|list\[[^\]]*\]|int range)>", help_text)
    assert not python_types, python_types
    if args != ["--help"] and args[0] in ("analyze", "check"):
        assert re.search(r"--rollout-col +COLUMN ", help_text)
        assert re.search(r"--steps +A:B ", help_text)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag(flag: str) -> None:
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"rcdiag {__version__}"
    assert "-V" in runner.invoke(app, ["--help"]).stdout


def _greedy_parts(console, key, columns, rows):  # type: ignore[no-untyped-def]
    """The definition: a column joins the last part while that part, measured whole with it, fits
    the width (the layout measures each column once instead)."""
    from rcdiag.commands._layout import needed_width

    parts: list[list[int]] = []
    for index in range(len(columns)):
        chosen = [*key, *(columns[i] for i in [*(parts[-1] if parts else []), index])]
        cells = [
            [*row[: len(key)], *(row[len(key) + i] for i in [*(parts[-1] if parts else []), index])]
            for row in rows
        ]
        if parts and needed_width(console, chosen, cells) <= console.width:
            parts[-1].append(index)
        else:
            parts.append([index])
    return parts


@pytest.mark.parametrize("width", [20, 41, 80, 100, 160])
@pytest.mark.parametrize("keys", [0, 1, 2])
def test_fitted_tables_split_as_measured_whole(width: int, keys: int) -> None:
    import random

    from rich.console import Console

    from rcdiag.commands._layout import Col, fitted_tables

    rng = random.Random(width * 10 + keys)
    key = [Col(f"key{k}", "right") for k in range(keys)]
    columns = [Col("metric " * rng.randint(1, 3) + str(c), wrap=c % 5 == 0) for c in range(17)]
    rows = [
        [*(str(rng.randint(0, 10**6)) for _ in key), *("x" * rng.randint(1, 14) for _ in columns)]
        for _ in range(6)
    ]
    console = Console(width=width, record=False)
    tables = fitted_tables(console, "Per step", key, columns, rows)
    expected = _greedy_parts(console, key, columns, rows)
    assert [len(t.columns) - keys for t in tables] == [len(p) for p in expected]
