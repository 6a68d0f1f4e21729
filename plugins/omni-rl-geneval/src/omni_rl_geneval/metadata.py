"""GenEval's vocabulary and prompt set: the 80 detector classes, the ten colours, the relations, the 553
evaluation prompts with their metadata, and the prompt templates both the set and the training generator use.

The data files are GenEval's own (MIT, ``data/LICENSE``), shipped in the package so nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from omni_rl.data import PromptRecord

TAGS: tuple[str, ...] = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
#: the tag counts of the published set (GenEval's paper, Table 1)
TAG_COUNTS: dict[str, int] = {
    "single_object": 80,
    "two_object": 99,
    "counting": 80,
    "colors": 94,
    "position": 100,
    "color_attr": 100,
}
COLORS: tuple[str, ...] = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")
#: the colour classifier's prompt templates; ``{c}`` the colour, ``{o}`` the class name
COLOR_TEMPLATES: tuple[str, ...] = ("a photo of a {c} {o}", "a photo of a {c}-colored {o}", "a photo of a {c} object")
RELATIONS: tuple[str, ...] = ("left of", "right of", "above", "below")
NUMBERS: tuple[str, ...] = ("zero", "one", "two", "three", "four")


def _data(name: str) -> str:
    return resources.files("omni_rl_geneval").joinpath("data", name).read_text(encoding="utf-8")


@cache
def class_names() -> tuple[str, ...]:
    """The 80 COCO class names in the detector's label order (label i is ``class_names()[i]``)."""
    return tuple(line.strip() for line in _data("object_names.txt").splitlines() if line.strip())


@cache
def _evaluation_rows() -> tuple[str, ...]:
    return tuple(line for line in _data("evaluation_metadata.jsonl").splitlines() if line.strip())


def evaluation_prompts() -> list[PromptRecord]:
    """The 553 evaluation prompts, in GenEval's order; metadata: ``tag``, ``include`` and optional ``exclude``."""
    records = []
    for line in _evaluation_rows():
        row = json.loads(line)
        prompt = str(row.pop("prompt"))
        records.append(PromptRecord(prompt, row))
    return records


def with_article(name: str) -> str:
    """GenEval's article rule: "an" before a vowel letter."""
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def plural(name: str) -> str:
    """GenEval's plural rule, kept as it is ("sheeps", "benchs") so generated prompts read like the set's."""
    return f"{name}es" if name.endswith("s") else f"{name}s"


def prompt_of(metadata: Mapping[str, Any]) -> str:
    """The prompt GenEval's templates write for ``metadata`` (``tag`` + ``include``): the inverse of the set."""
    tag, include = metadata["tag"], metadata["include"]
    if tag == "single_object":
        return f"a photo of {with_article(include[0]['class'])}"
    if tag == "two_object":
        return f"a photo of {with_article(include[0]['class'])} and {with_article(include[1]['class'])}"
    if tag == "counting":
        return f"a photo of {NUMBERS[include[0]['count']]} {plural(include[0]['class'])}"
    if tag == "colors":
        return f"a photo of {with_article(include[0]['color'])} {include[0]['class']}"
    if tag == "position":
        relation = include[1]["position"][0]
        return f"a photo of {with_article(include[1]['class'])} {relation} {with_article(include[0]['class'])}"
    if tag == "color_attr":
        first, second = (f"{with_article(c['color'])} {c['class']}" for c in include)
        return f"a photo of {first} and {second}"
    raise ValueError(f"unknown GenEval tag {tag!r}; tags are {', '.join(TAGS)}")


def check_metadata(metadata: Mapping[str, Any]) -> str | None:
    """Why ``metadata`` is not a GenEval prompt's metadata (None when it is): the reward's error names it."""
    if metadata.get("tag") not in TAGS:
        return f"'tag' must be one of {', '.join(TAGS)}, got {metadata.get('tag')!r}"
    include = metadata.get("include")
    if not isinstance(include, list) or not include:
        return "'include' must be a non-empty list of clauses"
    if not isinstance(metadata.get("exclude", []), list):
        return f"'exclude' must be a list of clauses, got {metadata.get('exclude')!r}"
    names = set(class_names())
    for position, clause in enumerate([*include, *metadata.get("exclude", [])]):
        if not isinstance(clause, Mapping) or clause.get("class") not in names:
            return f"clause {position}: 'class' must be one of the 80 GenEval class names, got {clause!r}"
        if not isinstance(clause.get("count"), int) or clause["count"] < 1:
            return f"clause {position}: 'count' must be an integer >= 1, got {clause.get('count')!r}"
        if "color" in clause and clause["color"] not in COLORS:
            return f"clause {position}: 'color' must be one of {', '.join(COLORS)}, got {clause['color']!r}"
        if "position" in clause:
            relation = clause["position"]
            valid = isinstance(relation, list | tuple) and len(relation) == 2 and relation[0] in RELATIONS
            if not valid or not isinstance(relation[1], int) or not 0 <= relation[1] < position:
                return f"clause {position}: 'position' must be [relation, index of an earlier clause], got {relation!r}"
    return None
