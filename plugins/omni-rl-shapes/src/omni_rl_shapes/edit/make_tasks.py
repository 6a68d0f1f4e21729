"""Write the shapes edit tasks (``python -m omni_rl_shapes.edit.make_tasks --out DIR --seed S [--check]``).

For each split (train / val / test, :mod:`.splits` says how they are kept disjoint) it writes ``<split>.jsonl``,
one row per task: ``prompt`` (the instruction), ``image`` (the source PNG, relative to the file), ``target_image``
(the target PNG, for supervised pretraining), ``task``, ``seed``, ``size`` and the target metadata the
``shapes_edit`` reward reads (``kind``, ``edit``, ``source_objects``, ``target_objects``, ``untouched``,
``fixed``), plus the PNGs under ``images/<split>/`` and ``targets/<split>/``. Kinds are balanced and interleaved.

Every task is checked as it is drawn: its rendered target must score strict under the reward's default
tolerances and its source must score ``edit`` 0 (the no-op control: strict), else it is drawn again. The output
is a pure function of the arguments; the shipped set (``tasks/`` beside this file) is the default arguments,
which ``--check`` compares with a fresh generation.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omni_rl_shapes.edit.config import ShapesEditRewardConfig
from omni_rl_shapes.edit.reward import score_edit
from omni_rl_shapes.edit.splits import SPLITS, assign
from omni_rl_shapes.edit.tasks import EDIT_KINDS, EditTask, apply_edit, candidates, instruction_of, sample_source
from omni_rl_shapes.scenes import Obj

SEED = 20260601
SIZE = 32
#: rows per kind of each split in the shipped set (6 kinds: train 300, val 48, test 48)
ROWS_PER_KIND: dict[str, int] = {"train": 50, "val": 8, "test": 8}
TASK_DIR = Path(__file__).parent / "tasks"
_MAX_DRAWS = 200


def _checked(task: EditTask, size: int, config: ShapesEditRewardConfig) -> bool:
    """The target scores strict and the unedited source does not pass for the edit (the no-op: it does)."""
    meta = task.metadata()
    source = task.render_source(size)
    if not score_edit(task.render_target(size), meta, config, source).strict:
        return False
    verdict = score_edit(source, meta, config, source)
    return verdict.strict if task.kind == "noop" else verdict.edit == 0.0


def draw_task(
    kind: str, split: str, seed: int, size: int, plan: tuple[dict[str, Any], dict[str, Any]], config: Any
) -> EditTask:
    """The task of ``kind`` drawn from ``seed`` out of the split's compositions and instructions."""
    compositions, instructions = plan
    allowed = instructions[split][kind]
    rng = np.random.default_rng(seed)
    for _ in range(_MAX_DRAWS):
        composition = compositions[split][int(rng.integers(len(compositions[split])))]
        objects = [Obj(c, s) for c, s in composition]
        if rng.random() < 0.5:
            objects.reverse()
        source = sample_source(rng, objects)
        options = [e for e in candidates(kind, source) if instruction_of(kind, e) in allowed]
        if not options:
            continue
        task = apply_edit(kind, options[int(rng.integers(len(options)))], source, rng)
        if task is not None and _checked(task, size, config):
            return task
    raise RuntimeError(f"no {kind} task for split {split} from seed {seed}")  # pragma: no cover


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def build(seed: int, size: int, rows_per_kind: dict[str, int]) -> dict[str, bytes]:
    """Every file of a task set, by relative path."""
    config = ShapesEditRewardConfig()
    plan = assign(seed)
    files: dict[str, bytes] = {}
    for split_index, split in enumerate(SPLITS):
        rows = []
        n = rows_per_kind.get(split, 0)
        for k in range(n * len(EDIT_KINDS)):
            kind = EDIT_KINDS[k % len(EDIT_KINDS)]
            task_seed = seed * 1000 + split_index * 100_000 + k
            task = draw_task(kind, split, task_seed, size, plan, config)
            name = f"{split}-{k:05d}"
            source, target = f"images/{split}/{k:05d}.png", f"targets/{split}/{k:05d}.png"
            files[source] = _png(task.render_source(size))
            files[target] = _png(task.render_target(size))
            row = {"prompt": task.instruction, "image": source, "target_image": target, "task": name}
            rows.append({**row, "seed": task_seed, "size": size, **task.metadata()})
        random.Random(seed + split_index).shuffle(rows)
        files[f"{split}.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    return files


def write(out: Path, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _pixels(data: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def stale_files(out: Path, files: dict[str, bytes]) -> list[str]:
    """The files under ``out`` that differ from ``files`` (PNGs compared by pixels, so a Pillow upgrade that
    compresses differently is not a difference)."""
    stale = []
    for relative, data in files.items():
        path = out / relative
        if not path.is_file():
            stale.append(str(path))
        elif relative.endswith(".png"):
            if not np.array_equal(_pixels(path.read_bytes()), _pixels(data)):
                stale.append(str(path))
        elif path.read_bytes() != data:
            stale.append(str(path))
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TASK_DIR, help="directory for <split>.jsonl and the PNGs")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--size", type=int, default=SIZE, help="image side in pixels (at least 16)")
    for split in SPLITS:
        parser.add_argument(f"--{split}", type=int, default=ROWS_PER_KIND[split], help=f"{split} rows per kind")
    parser.add_argument("--check", action="store_true", help="fail if the files differ from the generator")
    args = parser.parse_args(argv)
    if args.size < 16:
        parser.error(f"--size must be at least 16 px, got {args.size}")
    if any(getattr(args, s) < 0 for s in SPLITS):
        parser.error("rows per kind must be >= 0")
    files = build(args.seed, args.size, {s: getattr(args, s) for s in SPLITS})
    if args.check:
        stale = stale_files(args.out, files)
        if stale:
            print("stale edit task files (rerun python -m omni_rl_shapes.edit.make_tasks):", *stale, file=sys.stderr)
            return 1
        return 0
    write(args.out, files)
    for split in SPLITS:
        print(f"wrote {getattr(args, split) * len(EDIT_KINDS)} {split} tasks to {args.out / (split + '.jsonl')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
