"""What a parquet file's footer proves about its columns without decoding them.

The common dump has no padding: its mask holds True at every position. Decoding that column costs
a quarter of the read (its repetition levels as well as its values); the footer's statistics can
show instead that every value is true (docs/scale.md, "The mask"). Likewise they bound the
log-probs from above, so that no batch of a file whose log-probs are all ≤ 0 is searched for a
positive one.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


def leaf_chunks(meta: pq.FileMetaData, column: str) -> list[pq.ColumnChunkMetaData] | None:
    """The column chunk of a list column's values in every row group (one leaf per group), or
    None when the column is not one leaf in each (a struct, a name other columns share)."""
    prefix = f"{column}."
    chunks = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        found = [
            group.column(c)
            for c in range(group.num_columns)
            if group.column(c).path_in_schema.startswith(prefix)
        ]
        if len(found) != 1:
            return None
        chunks.append(found[0])
    return chunks


def _no_empty_list(chunk: pq.ColumnChunkMetaData) -> bool:
    """The chunk's statistics count no null: no null list, no empty list, no null value (a
    list's leaf counts each of them as a null)."""
    stats = chunk.statistics
    return stats is not None and stats.has_null_count and stats.null_count == 0


def mask_is_all_true(
    meta: pq.FileMetaData, schema: pa.Schema, mask: str, values: tuple[str, ...]
) -> bool:
    """Whether the statistics prove that the list column ``mask`` holds only True (or 1), with
    no null or empty list and no null value, and as many values in each row group as each list
    column of ``values`` (which hold no null or empty list either).

    Then the mask needs no decoding: it is True at every position of the rows. Its lengths are
    checked in total, row group by row group; a row's own length is not (two rows whose lengths
    differ in opposite ways would go unseen, and would mean the same: every token valid).
    """
    if mask not in schema.names:
        return False
    field_type = schema.field(mask).type
    if not (pa.types.is_list(field_type) or pa.types.is_large_list(field_type)):
        return False
    value_type = field_type.value_type
    if not (pa.types.is_boolean(value_type) or pa.types.is_integer(value_type)):
        return False
    mask_chunks = leaf_chunks(meta, mask)
    value_chunks = [leaf_chunks(meta, column) for column in values]
    if mask_chunks is None:
        return False
    for g, chunk in enumerate(mask_chunks):
        stats = chunk.statistics
        if not (_no_empty_list(chunk) and stats.has_min_max and stats.min == 1 and stats.max == 1):
            return False
        for chunks in value_chunks:
            if chunks is None or chunks[g].num_values != chunk.num_values:
                return False
            if not _no_empty_list(chunks[g]):
                return False
    return True


def values_at_most(meta: pq.FileMetaData, columns: tuple[str, ...], bound: float) -> bool:
    """Whether the statistics show every value of the list columns ``columns`` ≤ ``bound`` in
    every row group. NaN is left out of statistics, and is not above any bound either; a column
    without statistics, or with a maximum that is not a number, proves nothing."""
    for column in columns:
        chunks = leaf_chunks(meta, column)
        if chunks is None:
            return False
        for chunk in chunks:
            stats = chunk.statistics
            if stats is None or not stats.has_min_max:
                return False
            if not (isinstance(stats.max, float) and stats.max <= bound):
                return False
    return True
