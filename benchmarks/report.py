"""docs/benchmarks.md is shared by several benchmark scripts: each rewrites only its own `## ` section, and names
the machine the same way."""

from __future__ import annotations

import platform
from pathlib import Path


def _heading_start(text: str, heading: str) -> int:
    """Where the first line starting with ``heading`` begins, or -1: a mention of the heading inside another
    section's prose must not be taken for the section itself."""
    if text.startswith(heading):
        return 0
    start = text.find("\n" + heading)
    return start + 1 if start >= 0 else -1


def section_of(text: str, heading: str) -> str:
    """The section whose heading line starts with ``heading`` (up to the next `## ` heading), or "" if none."""
    start = _heading_start(text, heading)
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def replace_section(path: Path, heading: str, section: str) -> None:
    """Write ``section`` (starting with ``heading``) in place of the old one, or append it; the rest is kept."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    old = section_of(text, heading)
    body = section.rstrip() + "\n"
    if old:
        start = _heading_start(text, heading)
        rest = text[start + len(old) :]
        text = text[:start] + body + ("\n" + rest.lstrip("\n") if rest else "")
    else:
        text = text.rstrip() + "\n\n" + body
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def cpu_name() -> str:
    """The CPU's model name where Linux says it, else the architecture ("x86_64" alone says little about speed)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
