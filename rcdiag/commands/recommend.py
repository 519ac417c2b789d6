"""``rcdiag recommend``: the configuration to use for a dump, with the reasons and the verl config."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    reads_dump,
    shown,
    stderr,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._layout import hanging, header_line, paragraph
from rcdiag.commands._report_document import (
    FromOption,
    OptionalPaths,
    TopOption,
    load_or_compute,
)
from rcdiag.commands._terminal import CHI2_METRICS, CHI2_NOTE
from rcdiag.io.paths import printable
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import Choice, Recommendation, ReportDocument
from rcdiag.model.advice import KeptByStep

_STYLE = {"healthy": "bold green", "watch": "bold yellow", "act": "bold red"}

YamlOutput = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        help="Also write the recommended configuration as verl YAML to this file (atomically). "
        "Nothing is written when no configuration is recommended (a dump bug).",
    ),
]


def _bullets(items: Sequence[str], indent: int = 2) -> None:
    if items:
        stdout.print(hanging([("•", Text(printable(item))) for item in items], indent=indent))


def _code(text: str) -> None:
    """Code to copy (YAML, Python, overrides): never wrapped nor cut; YAML comments are re-wrapped
    at the width."""
    width = stdout.width
    lines: list[str] = []
    comment: list[str] = []
    for line in text.rstrip("\n").splitlines():
        if line.startswith("# "):
            comment.append(line[2:])
            continue
        if comment:
            lines += ["# " + c for c in textwrap.wrap(" ".join(comment), max(20, width - 2))]
            comment = []
        lines.append(line)
    lines += ["# " + c for c in textwrap.wrap(" ".join(comment), max(20, width - 2))]
    for line in lines:
        stdout.print(Text(printable(line)), soft_wrap=True)


def summary_line(choice: Choice, dialect: str) -> str:
    """The recommended configuration in words a user can paste: its verl keys."""
    from rcdiag.assess.recommendation.snippets import key_line

    return key_line(choice.config, "legacy" if dialect == "legacy" else "latest")


def show(document: ReportDocument) -> None:
    """The recommendation on the terminal: verdict, findings, choices with reasons, config."""
    from rcdiag.assess.recommendation.ranking import expected_text

    source = document.source
    verdict = document.verdict
    rec = document.recommendation or Recommendation(document.dialect)
    dialect = document.dialect
    status = str(None if verdict is None else verdict.status)
    paths = source.paths or ("?",)
    where = printable(str(paths[0])) if len(paths) == 1 else f"{len(paths)} files"
    stdout.print(
        header_line(
            stdout,
            "rcdiag recommend",
            [
                where,
                f"dialect {printable(dialect)}",
                f"{source.rows:,} sequences",
                f"{source.valid_tokens:,} valid tokens",
                f"{source.steps} steps",
            ],
        )
    )
    stdout.print(
        Text.assemble(
            (f"{status.upper()}: ", _STYLE.get(status, "bold")),
            printable("" if verdict is None else verdict.headline),
        )
    )
    choices = rec.choices
    notes = list(rec.notes)
    if choices and not rec.measured and notes:
        stdout.print(Text.assemble(("Note: ", "bold yellow"), notes.pop(0)))  # read this first
    if not choices:
        for note in notes:
            stdout.print(Text(printable(note)))
        return
    best = choices[0]
    stdout.print(Text.assemble(("\nRecommended: ", "bold"), (best.name, "bold cyan")))
    stdout.print(paragraph(Text(summary_line(best, dialect), style="cyan"), indent=2))
    stdout.print(paragraph(best.title, indent=2))
    if best.expected:
        stdout.print(paragraph(expected_text(best.expected, best.per_step), indent=2, style="dim"))
    if best.per_step is not None and best.per_step.story is not None:
        for kept in ("tokens", "sequences"):
            stdout.print(paragraph(step_line(best.per_step, kept), indent=2, style="dim"))
    stdout.print(Text("Why (rules that fired, then the thresholds)", style="bold"))
    _bullets(best.reasons)
    if rec.framework:  # asked for by --framework: before verl's own forms
        show_translation(rec.framework)
    stdout.print(Text("\nverl YAML", style="bold"))
    _code(best.yaml)
    stdout.print(Text("\nPython", style="bold"))
    _code(best.python)
    stdout.print(Text("\nCommand-line overrides", style="bold"))
    _code(best.overrides)
    if len(choices) > 1:
        stdout.print(Text("\nAlternatives", style="bold"))
        for i, choice in enumerate(choices[1:], start=2):
            title = Text.assemble((choice.name, "cyan"), f" — {choice.title}")
            stdout.print(hanging([(f"{i}.", title)]))
            stdout.print(paragraph(Text(summary_line(choice, dialect), style="cyan"), indent=5))
            _bullets(choice.reasons, 5)
            if choice.expected:
                text = expected_text(choice.expected, choice.per_step)
                stdout.print(paragraph(text, indent=5, style="dim"))
    if rec.avoid:
        stdout.print(Text("\nNot recommended for this dump", style="bold"))
        _bullets(
            [
                f"{group.reason}: {', '.join(p['name'] for p in group.presets)}"
                for group in rec.avoid
            ]
        )
    overall = document.overall or {}
    if any((overall.get(name) or 0.0) < 0 for name in CHI2_METRICS):
        notes.append(CHI2_NOTE)
    for note in notes:
        stdout.print()
        stdout.print(Text.assemble(("Note: ", "bold yellow"), printable(note)))


STEPS_SHOWN = 16
"""The most steps :func:`step_line` lists (evenly spread, with the worst and the last)."""


def step_line(kept: KeptByStep, what: str = "tokens") -> str:
    """``tokens kept per step: 0 100% · 1 100% · … · 13 67.1% · 14 77.7%`` (``what``: ``tokens``
    or ``sequences``; at most :data:`STEPS_SHOWN` steps: evenly spread, the worst and the last
    among them)."""
    from rcdiag.formatting import pct

    shares = kept.kept_token_share if what == "tokens" else kept.kept_sequence_share
    count = len(kept.steps)
    chosen = set(range(count))
    if count > STEPS_SHOWN:
        chosen = {round(i * (count - 1) / (STEPS_SHOWN - 2)) for i in range(STEPS_SHOWN - 1)}
        if kept.worst_step is not None:
            chosen.add(kept.steps.index(kept.worst_step))
    cells = [f"{kept.steps[i]} {pct(shares[i])}" for i in sorted(chosen) if shares[i] is not None]
    which = "" if count <= STEPS_SHOWN else f" ({len(cells)} of {count} steps)"
    return f"{what} kept per step{which}: " + " · ".join(cells)


def write_config(document: ReportDocument, path: Path, quiet: bool) -> bool:
    """Write the recommended configuration's verl YAML to ``path`` (atomically); when none is
    recommended (a dump bug, no overall metrics), write nothing and say why. Returns whether it
    wrote."""
    rec = document.recommendation
    best = None if rec is None else rec.recommended
    if best is None:
        if not quiet:
            bug = None if rec is None else rec.dump_bug
            why = (
                f"the dump shows a bug in how it was made ({bug}): fix the dump, not the correction"
                if bug
                else "no configuration is recommended"
            )
            stderr.print(f"[yellow]Note:[/] nothing written to {shown(path)}: {shown(why)}.")
        return False
    write_output(path, best.yaml)
    return True


def show_translation(entry: Mapping[str, Any]) -> None:
    """The recommended configuration in another framework's keys, exact or closest, and why."""
    how = "the same mechanism" if entry["exact"] else "the closest it has"
    stdout.print(Text.assemble((f"\n{entry['title']} configuration", "bold"), f" ({how})"))
    _code(entry["snippet"])
    _bullets(entry["notes"])


@reads_dump
def recommend(
    paths: OptionalPaths = None,
    output: YamlOutput = None,
    from_json: FromOption = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    top: TopOption = DEFAULT_TOP_K,
    framework: Annotated[
        str | None,
        typer.Option(
            "--framework",
            metavar="NAME",
            help="Also give the recommended configuration in this framework's own keys: trl, "
            "slime, openrlhf, nemo_rl, prime_rl, areal, skyrl or open_instruct (the closest "
            "equivalent where it lacks a mechanism, and saying so).",
        ),
    ] = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Recommend a rollout-correction configuration for a dump, with the verl config.

    Ranked choices, the reasons in plain words, and the verl YAML / Python preset call to paste
    (the same advice as rcdiag report); -o writes the YAML to a file.
    """
    with cli_errors(debug):
        written = outputs({"--output": output, "--json": json_path}, paths, {"--from": from_json})
        document = load_or_compute(
            paths, from_json, dialect, veto_threshold, top, dump_options, quiet, translate=framework
        )
        from rcdiag.run.documents import malformed_results

        with malformed_results(from_json):
            wrote_config = "--output" in written and write_config(
                document, written["--output"], quiet
            )
            if "--json" in written:
                write_output(written["--json"], document.to_json())
            if not quiet:
                show(document)
    if quiet:
        return
    if wrote_config:
        wrote(written["--output"], ": the recommended verl configuration")
    if "--json" in written:
        wrote(written["--json"])
