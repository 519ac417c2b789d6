"""``rcdiag recommend``: the configuration to use for a dump, with the reasons and the verl config."""

from __future__ import annotations

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
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._report_document import (
    FromOption,
    OptionalPaths,
    TopOption,
    load_or_compute,
)
from rcdiag.io.paths import printable
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import ReportDocument

_STYLE = {"healthy": "bold green", "watch": "bold yellow", "act": "bold red"}


def _bullet(text: str, indent: int = 2) -> Text:
    return Text(" " * indent + "• ") + Text(text)


def show(document: ReportDocument) -> None:
    """The recommendation on the terminal: verdict, findings, choices with reasons, config."""
    from rcdiag.assess.recommend import expected_text

    source = document.source
    verdict = document.verdict or {}
    rec = document.recommendation or {}
    status = str(verdict.get("status"))
    paths = source.paths or ("?",)
    where = printable(str(paths[0])) if len(paths) == 1 else f"{len(paths)} files"
    stdout.print(
        Text.assemble(
            ("rcdiag recommend", "bold"),
            f" · {where} · dialect {document.dialect} · {source.rows:,} sequences · "
            f"{source.valid_tokens:,} valid tokens · {source.steps} steps",
        )
    )
    stdout.print(
        Text.assemble(
            (f"{status.upper()}: ", _STYLE.get(status, "bold")), verdict.get("headline", "")
        )
    )
    choices = rec.get("choices") or []
    notes = list(rec.get("notes") or [])
    if choices and not rec.get("measured", True) and notes:
        stdout.print(Text.assemble(("Note: ", "bold yellow"), notes.pop(0)))  # read this first
    if not choices:
        for note in notes:
            stdout.print(Text(note))
        return
    best = choices[0]
    stdout.print(Text.assemble(("\nRecommended: ", "bold"), (best["name"], "bold cyan")))
    stdout.print(Text("  " + best["title"]))
    if best.get("expected"):
        stdout.print(Text("  " + expected_text(best["expected"]), style="dim"))
    stdout.print(Text("Why (rules that fired, then the thresholds)", style="bold"))
    for reason in best["reasons"]:
        stdout.print(_bullet(reason))
    stdout.print(Text("\nverl YAML", style="bold"))
    stdout.print(Text(best["yaml"].rstrip("\n")))
    stdout.print(Text("\nPython", style="bold"))
    stdout.print(Text(best["python"]))
    stdout.print(Text("\nCommand-line overrides", style="bold"))
    stdout.print(Text(best["overrides"]))
    if len(choices) > 1:
        stdout.print(Text("\nAlternatives", style="bold"))
        for i, choice in enumerate(choices[1:], start=2):
            stdout.print(
                Text.assemble(f"  {i}. ", (choice["name"], "cyan"), f" — {choice['title']}")
            )
            for reason in choice["reasons"]:
                stdout.print(_bullet(reason, 5))
            if choice.get("expected"):
                stdout.print(Text("     " + expected_text(choice["expected"]), style="dim"))
            stdout.print(Text("     " + choice["python"].splitlines()[-1], style="dim"))
    if rec.get("avoid"):
        stdout.print(Text("\nNot recommended for this dump", style="bold"))
        for group in rec["avoid"]:
            names = ", ".join(p["name"] for p in group["presets"])
            stdout.print(_bullet(f"{group['reason']}: {names}"))
    for note in notes:
        stdout.print(Text.assemble(("\nNote: ", "bold yellow"), note))


@reads_dump
def recommend(
    paths: OptionalPaths = None,
    from_json: FromOption = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    top: TopOption = DEFAULT_TOP_K,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Recommend a rollout-correction configuration for a dump, with the verl config.

    Ranked choices, the reasons in plain words, and the verl YAML / Python preset call to paste
    (the same advice as rcdiag report).
    """
    with cli_errors(debug):
        written = outputs({"--json": json_path}, paths, {"--from": from_json})
        document = load_or_compute(
            paths, from_json, dialect, veto_threshold, top, dump_options, quiet
        )
        if "--json" in written:
            write_output(written["--json"], document.to_json())
        if not quiet:
            from rcdiag.report.run import malformed_results

            with malformed_results(from_json):
                show(document)
    if quiet:
        return
    if "--json" in written:
        wrote(written["--json"])
