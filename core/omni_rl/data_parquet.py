"""``.parquet`` prompt sources: one record per row, read with pyarrow, imported only when such a file is given.

The ``prompt`` column is the prompt (or ``caption``, the name Pick-a-Pic and most image-caption datasets use,
when there is no ``prompt`` column); every other column is passed on as metadata, as a ``.jsonl`` line's other
keys are. Cells keep their Python types: strings, numbers, ``bytes`` (encoded images) and dicts (structs, such as
the ``{"bytes": ..., "path": ...}`` that HuggingFace datasets' ``Image`` feature stores).

The whole table is held in the driver's memory and a drawn row's metadata travels to the workers with the
rollout request: a file that embeds its images should fit in memory (otherwise make its image columns paths).
"""

from __future__ import annotations

from typing import Any

from omni_rl.errors import ConfigError

#: the file magic at both ends of every parquet file
MAGIC = b"PAR1"
#: columns that hold the prompt, in order of preference
PROMPT_COLUMNS: tuple[str, ...] = ("prompt", "caption")
INSTALL_HINT = (
    'reading .parquet files needs pyarrow: pip install "omni-rl-dpo[parquet]" (the dpo plugin\'s extra), or '
    "pip install pyarrow"
)


def is_parquet(data: bytes, name: str) -> bool:
    """By extension, or by the magic bytes at both ends for a parquet file named otherwise."""
    return name.endswith((".parquet", ".pq")) or (len(data) >= 12 and data[:4] == MAGIC and data[-4:] == MAGIC)


def read_parquet_rows(data: bytes, name: str, config_path: str) -> list[tuple[str, dict[str, Any]]]:
    """(prompt, metadata) per row of the parquet file ``data``; ``name`` and ``config_path`` are for errors."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"cannot read {name}: pyarrow is not installed @ {config_path}", hint=INSTALL_HINT) from None
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read {name} as a parquet file ({exc}) @ {config_path}",
            hint="give a valid .parquet file, or a .txt (one prompt per line) or .jsonl file",
        ) from None
    column = next((c for c in PROMPT_COLUMNS if c in table.column_names), None)
    if column is None:
        raise ConfigError(
            f"{name} has no prompt column: its columns are {table.column_names} @ {config_path}",
            hint="name the prompt column 'prompt' (or 'caption'); the other columns are passed on as metadata",
        )
    rows = []
    for number, row in enumerate(table.to_pylist(), start=1):
        prompt = row.pop(column)
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(
                f"{name}: row {number} has no prompt in column {column!r} (got {prompt!r}) @ {config_path}",
                hint="every row needs a non-empty string prompt; drop the rows without one",
            )
        rows.append((prompt, row))
    return rows
