"""Write GenEval-style training prompts with their metadata (``python -m omni_rl_geneval.make_prompts --seed S
--n N --out FILE.jsonl``), none of them one of the 553 evaluation prompts.

Flow-GRPO trains on generated prompts and evaluates on the official set; a training prompt that is also an
evaluation prompt would make the evaluation measure memorisation. The generator uses GenEval's own templates,
classes, colours, counts (2-4) and relations (:mod:`omni_rl_geneval.metadata`), draws tags in the evaluation
set's proportions, and rejects any prompt of the evaluation set and any repeat. ``single_object`` is never
drawn: its 80 possible prompts are all in the evaluation set; ``counting`` has 160 prompts outside it (80 classes x
counts 2-4, less the set's 80), so a large file holds all of them and the other tags make up the rest.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omni_rl_geneval.metadata import (
    COLORS,
    RELATIONS,
    TAG_COUNTS,
    class_names,
    evaluation_prompts,
    prompt_of,
)

#: tags drawn for training, weighted as in the evaluation set
TRAIN_TAGS: dict[str, int] = {tag: n for tag, n in TAG_COUNTS.items() if tag != "single_object"}


def draw(tag: str, rng: random.Random) -> dict[str, Any]:
    """Random metadata of ``tag``, as GenEval's prompt generator shapes it."""
    names = class_names()
    if tag == "two_object":
        first, second = rng.sample(names, 2)
        return {"tag": tag, "include": [{"class": first, "count": 1}, {"class": second, "count": 1}]}
    if tag == "counting":
        name, count = rng.choice(names), rng.randint(2, 4)
        return {
            "tag": tag,
            "include": [{"class": name, "count": count}],
            "exclude": [{"class": name, "count": count + 1}],
        }
    if tag == "colors":
        return {"tag": tag, "include": [{"class": rng.choice(names), "count": 1, "color": rng.choice(COLORS)}]}
    if tag == "position":
        target, subject = rng.sample(names, 2)
        relation = rng.choice(RELATIONS)
        include = [{"class": target, "count": 1}, {"class": subject, "count": 1, "position": [relation, 0]}]
        return {"tag": tag, "include": include}
    if tag == "color_attr":
        first, second = rng.sample(names, 2)
        a, b = rng.sample(COLORS, 2)
        include = [{"class": first, "count": 1, "color": a}, {"class": second, "count": 1, "color": b}]
        return {"tag": tag, "include": include}
    raise ValueError(f"no training prompts for tag {tag!r}")


def generate(seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` distinct prompt objects (``prompt`` first, then the metadata), none in the evaluation set."""
    rng = random.Random(seed)
    taken = {record.prompt for record in evaluation_prompts()}
    tags, weights = list(TRAIN_TAGS), list(TRAIN_TAGS.values())
    rows: list[dict[str, Any]] = []
    attempts = 0
    while len(rows) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise RuntimeError(f"could not draw {n} distinct training prompts (got {len(rows)})")
        metadata = draw(rng.choices(tags, weights)[0], rng)
        prompt = prompt_of(metadata)
        if prompt in taken:
            continue
        taken.add(prompt)
        rows.append({"prompt": prompt, **metadata})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=50_000, help="number of prompts")
    parser.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    rows = generate(args.seed, args.n)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"wrote {len(rows)} GenEval-style training prompts to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
