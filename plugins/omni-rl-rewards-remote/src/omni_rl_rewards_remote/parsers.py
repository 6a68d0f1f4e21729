"""Turning a VLM's reply into a score in [0, 1].

A reply that does not say what the parser needs raises :class:`ParseError`: the sample then scores 0 and is
counted as a failure, rather than being read as a confident "worst" verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NUMBER = r"[-+]?\d+(?:\.\d+)?"
#: "Score: 4", "Final Score: 3.5", "score = 7", "**Score**: 8": the number after the word score
_AFTER_SCORE = re.compile(rf"score\W{{0,6}}({_NUMBER})", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)
_WORDS = re.compile(r"[a-z]+")


class ParseError(ValueError):
    """The reply holds no usable answer."""


def parse_number(reply: str, low: float, high: float) -> float:
    """The judge's number mapped linearly from [low, high] onto [0, 1].

    The number is the last one written after the word "score" (a rationale may come first), else the first
    number of the reply ("4 out of 5", "4/5"). A number outside [low, high] is a misread answer: ParseError.
    """
    after_score = _AFTER_SCORE.findall(reply)
    found = after_score[-1] if after_score else next(iter(_ANY_NUMBER.findall(reply)), None)
    if found is None:
        raise ParseError(f"no number in the reply {_short(reply)!r}")
    value = float(found)
    if not low <= value <= high:
        raise ParseError(f"the reply's number {value:g} is outside [{low:g}, {high:g}]: {_short(reply)!r}")
    return (value - low) / (high - low)


def parse_scale_1_5(reply: str) -> float:
    """A 1-5 rating (UnifiedReward's scale) mapped to [0, 1]: 1 -> 0, 3 -> 0.5, 5 -> 1."""
    return parse_number(reply, 1.0, 5.0)


def parse_yes_no(reply: str) -> float:
    """1 for yes, 0 for no: the first word when it is one of them, else the only one of the two the reply uses."""
    words = _WORDS.findall(reply.lower())
    if words and words[0] in ("yes", "no"):
        return 1.0 if words[0] == "yes" else 0.0
    said = {word for word in words if word in ("yes", "no")}
    if len(said) != 1:
        raise ParseError(f"the reply says {'both yes and no' if said else 'neither yes nor no'}: {_short(reply)!r}")
    return 1.0 if said == {"yes"} else 0.0


def ocr_text(reply: str) -> str:
    """The text a VLM read back, without the quotes or the "Text:" label some models add around it."""
    text = reply.strip()
    text = re.sub(r"^(the\s+)?text(\s+in\s+the\s+image)?(\s+is|\s+reads)?\s*[:\-]\s*", "", text, flags=re.IGNORECASE)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1]
    return text


def _short(reply: str, limit: int = 120) -> str:
    return reply if len(reply) <= limit else reply[:limit] + "..."


def number_parser(low: float, high: float) -> Callable[[str], float]:
    return lambda reply: parse_number(reply, low, high)
