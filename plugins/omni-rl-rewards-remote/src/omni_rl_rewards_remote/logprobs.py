"""``score = "yes_prob"``: a yes/no judge's verdict as the probability of "yes", from the answer token's log-probs.

The request asks for one token with its top 20 alternatives (``max_tokens = 1, logprobs = true, top_logprobs =
20``, the OpenAI chat-completions fields vLLM and SGLang serve); the score is P(yes) / (P(yes) + P(no)), each the
sum of exp(logprob) over the alternatives that read "yes" (or "no") once case and surrounding whitespace are set
aside ("Yes", " yes", "YES"; a tokenizer's word-start marks "Ġ" and "▁" too). This is the P(Yes)-scoring of
Flow-Factory's consistent_editing and of EditScore-style judges: a graded signal where the parsed answer is 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from omni_rl_rewards_remote.parsers import ParseError

#: how many alternatives of the answer token the request asks for (the most OpenAI's API allows)
TOP_LOGPROBS = 20
#: word-start marks some servers leave on raw tokens (GPT-2 byte-level BPE, SentencePiece)
_MARKS = "Ġ▁"


class MissingLogprobs(Exception):
    """The server's reply holds no log-probs: it cannot serve ``yes_prob`` at all (every call would fail alike)."""


def answer_word(token: str) -> str:
    """``token`` as the word it spells: surrounding whitespace and word-start marks off, lower case."""
    return token.strip().strip(_MARKS).strip().lower()


def yes_probability(reply: Any) -> float:
    """P(yes) / (P(yes) + P(no)) of the first answer token's top log-probs (the sampled token's included).

    MissingLogprobs when the reply has no ``choices[0].logprobs.content``; ParseError when neither yes nor no is
    among the alternatives (the judge answered something else)."""
    try:
        choice = reply["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ParseError("not a chat-completions reply (no choices[0])") from None
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        raise MissingLogprobs("the reply has no choices[0].logprobs.content")
    first = content[0]
    alternatives = [first, *(first.get("top_logprobs") or [])]
    by_token: dict[str, float] = {}
    for entry in alternatives:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            raise ParseError(f"a log-prob entry without a token: {str(entry)[:80]!r}")
        try:
            by_token[entry["token"]] = float(entry["logprob"])
        except (KeyError, TypeError, ValueError):
            raise ParseError(f"the log-prob of token {entry['token']!r} is not a number") from None
    yes = sum(math.exp(lp) for token, lp in by_token.items() if answer_word(token) == "yes")
    no = sum(math.exp(lp) for token, lp in by_token.items() if answer_word(token) == "no")
    if yes + no <= 0.0:
        shown = ", ".join(repr(token) for token in list(by_token)[:5])
        raise ParseError(f"neither yes nor no among the answer's top {len(by_token)} tokens ({shown}, ...)")
    return yes / (yes + no)
