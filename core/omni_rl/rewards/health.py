"""Whether each reward still gives the run something to train on, said out loud.

``on_error = "zero"`` keeps a run going through a flaky reward, which is its point, but on its own it hid
everything: the exception text was never shown, and a reward that failed every batch (a wrong URL, an unset key
in a reward actor, a bug), or returned NaN for every image, trained on nothing and the run exited 0. So, per
reward:

- its first error is printed the step it happens; while it keeps failing, a reminder with the count and the
  latest error every ``REPORT_EVERY`` steps (never more often, so a long run's console stays readable);
- a step in which it gave no valid score (every call failed, or no finite score: ``ScoredBatch.valid``) counts
  towards ``[[reward]] max_invalid_steps``; that many in a row stop the run with a RuntimeFailure naming the
  reward, its section, why, and the resume command. One valid step resets the count.

The eval rewards are watched the same way for the messages, and never stop a run (``stops=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omni_rl.errors import RuntimeFailure

#: steps between two reminders of a reward that keeps failing
REPORT_EVERY = 20


class RewardHealth:
    """Tracks the rewards of one :class:`~omni_rl.rewards.combined.CombinedReward` across steps (see the module
    docstring)."""

    def __init__(self, sections: Sequence[Any], names: Sequence[str], *, stops: bool = True) -> None:
        self.sections = list(sections)
        self.names = list(names)
        self.stops = stops
        #: consecutive steps without a valid score, by reward name
        self.invalid_streak: dict[str, int] = dict.fromkeys(self.names, 0)
        #: the step of the last message about each reward, and the failing steps since it
        self._reported_at: dict[str, int] = {}
        self._failing_since_report: dict[str, int] = {}

    def observe(self, step: int, scored: Any, resume: str = "") -> list[str]:
        """The messages to print for this step's ``scored`` batch (plain text, one line each); raises a
        RuntimeFailure once a reward has had ``max_invalid_steps`` steps in a row without a valid score.
        ``resume``: the command that resumes the run, for the error's hint."""
        messages = []
        for name, section in zip(self.names, self.sections, strict=True):
            valid = scored.valid.get(name, len(scored.total))
            if scored.errors.get(name) or scored.failures.get(name) or not valid:
                messages += self._report(step, name, section, _why(name, scored))
            self.invalid_streak[name] = 0 if valid else self.invalid_streak[name] + 1
            limit = getattr(section, "max_invalid_steps", 0)
            if self.stops and limit and self.invalid_streak[name] >= limit:
                raise self._stop(step, name, section, scored, resume)
        return messages

    def _report(self, step: int, name: str, section: Any, why: str) -> list[str]:
        self._failing_since_report[name] = self._failing_since_report.get(name, 0) + 1
        last = self._reported_at.get(name)
        if last is not None and step - last < REPORT_EVERY:
            return []
        where = _where(section)
        if last is None:
            line = f"reward {name!r} ({where}) failed at step {step}: {why}"
        else:
            count = self._failing_since_report[name]
            line = f"reward {name!r} ({where}) failed in {count} of the last {step - last} steps; latest: {why}"
        self._reported_at[name] = step
        self._failing_since_report[name] = 0
        return [line]

    def _stop(self, step: int, name: str, section: Any, scored: Any, resume: str) -> RuntimeFailure:
        where = _where(section)
        hint = f"fix the reward, or raise max_invalid_steps in {where} (0 never stops) to keep training through it" + (
            f"; then resume with: {resume}" if resume else ""
        )
        return RuntimeFailure(
            f"stopped at step {step}: reward {name!r} gave no valid score for {self.invalid_streak[name]} "
            f"consecutive steps ({_why(name, scored)}); those steps trained on nothing from it",
            hint=hint,
        )


def _why(name: str, scored: Any) -> str:
    """What went wrong with reward ``name`` in ``scored``, in a few words."""
    error = scored.errors.get(name, "")
    if error:
        return f'{error} (scored 0, as on_error = "zero" says)'
    if scored.failures.get(name):
        return f"it reported {scored.failures[name]} failed sample(s) itself, scored 0"
    return "no finite score (every score NaN or infinite)"


def _where(section: Any) -> str:
    return getattr(section, "path", "") or "its [[reward]] section"
