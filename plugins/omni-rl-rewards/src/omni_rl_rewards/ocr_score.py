"""The OCR reward as a pure function of text (Flow-GRPO's definition, docs/math.md#ocr), apart from any OCR engine.

Flow-GRPO scores an image whose prompt asks for a quoted text, e.g. ``a sign that says "Open Late"``:

* target = the text between the first pair of double quotes of the prompt;
* lowercase the target and the OCR output and drop their spaces (``" "`` only, as Flow-GRPO does);
* dist = 0 if the target occurs in the OCR text, else min(Levenshtein(ocr, target), len(target));
* reward = 1 - dist / len(target), in [0, 1]; an empty OCR text scores 0.

The cap at len(target) keeps a long stream of unrelated OCR text from driving the reward below 0: reading
garbage is no worse than reading nothing.

Where Flow-GRPO's code fails (it takes ``prompt.split('"')[1]``, so a prompt without quotes raises
IndexError and an empty target divides by zero), this module raises a RuntimeFailure that names the prompt:
a text-rendering prompt set without quoted targets is a data mistake, and scoring it 0 would train on noise.
"""

from __future__ import annotations

import re

import Levenshtein

from omni_rl.errors import RuntimeFailure

_QUOTED = re.compile(r'"([^"]*)"')
_TYPOGRAPHIC_QUOTES = ("\u201c", "\u201d", "\u201e", "\u00ab", "\u00bb")


def normalize_text(text: str) -> str:
    """Lowercase and drop spaces, so case and word spacing neither help nor hurt the reward."""
    return text.lower().replace(" ", "")


def extract_target(prompt: str) -> str:
    """The text between the first pair of double quotes of ``prompt`` (as written, not normalised).

    Raises RuntimeFailure when the prompt has no such pair or the quoted text is empty after normalisation.
    """
    match = _QUOTED.search(prompt)
    if match is None:
        hint = 'write the text the image must show between double quotes, e.g. a sign that says "Open Late"'
        if any(quote in prompt for quote in _TYPOGRAPHIC_QUOTES):
            hint += '; typographic quotes (\u201c\u201d, \u00ab\u00bb) are not recognised, use ASCII "'
        raise RuntimeFailure(f"the ocr reward found no double-quoted target text in prompt {prompt!r}", hint)
    target = match.group(1)
    if not normalize_text(target):
        raise RuntimeFailure(
            f"the quoted target text of prompt {prompt!r} is empty",
            'put at least one non-space character between the quotes, e.g. "Open Late"',
        )
    return target


def ocr_distance(ocr_text: str, target: str) -> int:
    """Flow-GRPO's capped edit distance between normalised OCR text and target (0 when target ⊂ OCR)."""
    ocr_norm, target_norm = normalize_text(ocr_text), normalize_text(target)
    if target_norm in ocr_norm:
        return 0
    return min(Levenshtein.distance(ocr_norm, target_norm), len(target_norm))


def ocr_reward(ocr_text: str, target: str) -> float:
    """1 - dist / len(target) in [0, 1]; ``target`` is the quoted text (see :func:`extract_target`).

    Raises ValueError if ``target`` is empty after normalisation (the reward is undefined there).
    """
    length = len(normalize_text(target))
    if length == 0:
        raise ValueError("the ocr reward is undefined for an empty target text")
    return 1.0 - ocr_distance(ocr_text, target) / length
