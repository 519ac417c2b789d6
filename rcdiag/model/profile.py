"""Where the mismatch lives: the ``profile`` object of a report document (docs/report.md, "The
profile"), as :class:`~rcdiag.metrics.profile.MismatchProfile` measures it.

Notation: ℓ = log π_train − log π_rollout per valid token, Σℓ and mean ℓ per sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.model.fields import Field, JsonRecord, Number, safe_number, safe_numbers


@dataclass(frozen=True)
class Histogram(JsonRecord):
    """One histogram on the profile's ``histogram_edges``.

    Attributes:
        counts: values per bin (one more bin than edges; by magnitude on each side of 0:
            docs/report.md, "The profile").
        total: their sum.
    """

    counts: tuple[int, ...]
    total: int

    def to_json(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "total": self.total}

    @classmethod
    def read(cls, field: Field) -> Histogram:
        return cls(counts=field["counts"].integers(), total=field["total"].count())


@dataclass(frozen=True)
class Bucket(JsonRecord):
    """One bucket of tokens (by rollout probability or position) or of sequences (by length).

    Attributes:
        bucket: the bucket's index.
        label: its range as the report shows it (``0.1–0.25``, ``4–7``).
        figures: ``tokens``, ``mean_log_ratio``, ``mean_abs_log_ratio``, ``k3``, … (length buckets
            also ``rows``, ``mean_abs_seq_log_ratio`` and ``max_abs_seq_log_ratio``).
    """

    bucket: int
    label: str
    figures: Mapping[str, Number]

    def to_json(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "label": self.label, **safe_numbers(self.figures)}

    @classmethod
    def read(cls, field: Field) -> Bucket:
        values = field.mapping()
        rest = {k: v for k, v in values.items() if k not in ("bucket", "label")}
        return cls(
            bucket=field["bucket"].integer(),
            label=field["label"].string(),
            figures=field.holding(rest).numbers(),
        )


@dataclass(frozen=True)
class TopSequence(JsonRecord):
    """One of the worst sequences (by |Σℓ| or by max token |ℓ|).

    Attributes:
        step: its training step.
        stream_row: its position among every row read (from 0).
        file: the parquet file it is in (None when the reader did not keep it).
        row: its row in that file (from 0), or None.
        uid: the dump's ``uid`` of the row, or None.
        valid_tokens: its valid response tokens.
        sum_log_ratio: Σℓ over them.
        mean_log_ratio: Σℓ / valid_tokens.
        max_abs_log_ratio: the largest |ℓ| of a token.
        worst_token_position: that token's position in the response (from 1).
        worst_token_log_ratio: that token's ℓ.
    """

    step: int
    stream_row: int
    file: str | None
    row: int | None
    uid: str | None
    valid_tokens: int
    sum_log_ratio: Number
    mean_log_ratio: Number
    max_abs_log_ratio: Number
    worst_token_position: int
    worst_token_log_ratio: Number

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "stream_row": self.stream_row,
            "file": self.file,
            "row": self.row,
            "uid": self.uid,
            "valid_tokens": self.valid_tokens,
            "sum_log_ratio": safe_number(self.sum_log_ratio),
            "mean_log_ratio": safe_number(self.mean_log_ratio),
            "max_abs_log_ratio": safe_number(self.max_abs_log_ratio),
            "worst_token_position": self.worst_token_position,
            "worst_token_log_ratio": safe_number(self.worst_token_log_ratio),
        }

    @classmethod
    def read(cls, field: Field) -> TopSequence:
        return cls(
            step=field["step"].integer(),
            stream_row=field["stream_row"].count(),
            file=field["file"].optional_string(),
            row=field["row"].optional_integer(),
            uid=field["uid"].optional_string(),
            valid_tokens=field["valid_tokens"].count(),
            sum_log_ratio=field["sum_log_ratio"].optional_number(),
            mean_log_ratio=field["mean_log_ratio"].optional_number(),
            max_abs_log_ratio=field["max_abs_log_ratio"].optional_number(),
            worst_token_position=field["worst_token_position"].count(),
            worst_token_log_ratio=field["worst_token_log_ratio"].optional_number(),
        )


def _buckets(field: Field) -> tuple[Bucket, ...]:
    return tuple(Bucket.read(b) for b in field.items())


@dataclass(frozen=True)
class Profile(JsonRecord):
    """Where the mismatch lives (docs/report.md, "The profile").

    Attributes:
        histogram_edges: the signed log-spaced bin edges shared by the three histograms.
        token_log_ratio: histogram of ℓ over valid tokens.
        seq_sum_log_ratio: histogram of Σℓ over sequences with a valid token.
        seq_mean_log_ratio: histogram of mean ℓ over those sequences.
        by_rollout_prob: tokens by rollout probability (non-empty buckets only).
        by_position: tokens by position in the response (⌊log₂⌋ buckets).
        by_length: sequences by response length (⌊log₂⌋ buckets).
        top_sequences: ranking name (``by_abs_sum``, ``by_max_token``) → the worst sequences.
        rows: sequences seen; empty_rows: those without a valid token.
        valid_tokens: valid tokens seen.
        top_k: sequences kept per ranking.
    """

    histogram_edges: tuple[float, ...]
    token_log_ratio: Histogram
    seq_sum_log_ratio: Histogram
    seq_mean_log_ratio: Histogram
    by_rollout_prob: tuple[Bucket, ...]
    by_position: tuple[Bucket, ...]
    by_length: tuple[Bucket, ...]
    top_sequences: Mapping[str, tuple[TopSequence, ...]]
    rows: int
    empty_rows: int
    valid_tokens: int
    top_k: int

    def to_json(self) -> dict[str, Any]:
        return {
            "histogram_edges": [safe_number(e) for e in self.histogram_edges],
            "token_log_ratio": self.token_log_ratio.to_json(),
            "seq_sum_log_ratio": self.seq_sum_log_ratio.to_json(),
            "seq_mean_log_ratio": self.seq_mean_log_ratio.to_json(),
            "by_rollout_prob": [b.to_json() for b in self.by_rollout_prob],
            "by_position": [b.to_json() for b in self.by_position],
            "by_length": [b.to_json() for b in self.by_length],
            "top_sequences": {
                name: [s.to_json() for s in records] for name, records in self.top_sequences.items()
            },
            "rows": self.rows,
            "empty_rows": self.empty_rows,
            "valid_tokens": self.valid_tokens,
            "top_k": self.top_k,
        }

    @classmethod
    def read(cls, field: Field) -> Profile:
        edges = field["histogram_edges"].number_list(nulls=False)
        return cls(
            histogram_edges=tuple(float(v) for v in edges if v is not None),
            token_log_ratio=Histogram.read(field["token_log_ratio"]),
            seq_sum_log_ratio=Histogram.read(field["seq_sum_log_ratio"]),
            seq_mean_log_ratio=Histogram.read(field["seq_mean_log_ratio"]),
            by_rollout_prob=_buckets(field["by_rollout_prob"]),
            by_position=_buckets(field["by_position"]),
            by_length=_buckets(field["by_length"]),
            top_sequences={
                name: tuple(TopSequence.read(s) for s in records.items())
                for name, records in field["top_sequences"].entries()
            },
            rows=field["rows"].count(),
            empty_rows=field["empty_rows"].count(),
            valid_tokens=field["valid_tokens"].count(),
            top_k=field["top_k"].count(),
        )
