"""docs/math.md and docs/design.md are what docstrings, comments, docs and example configs cite for a formula or a
design decision, by section (``docs/math.md#flow-grpo-loss``). These tests keep the citations honest: every cited
section exists under GitHub's anchor rule, the formula modules cite theirs, and nothing cites the notes the two
files replaced (they never shipped with the repository, so a user could not follow such a reference).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = {name: ROOT / "docs" / name for name in ("math.md", "design.md")}

#: the retired notes' file names, spelled so that this file does not mention them itself
RETIRED = tuple(f"{stem}.md" for stem in ("MATH", "DESIGN"))
#: text files the search reads; everything a docstring, comment, doc or example config lives in
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yaml", ".yml", ".rst", ".sh"}
#: folders that are not the repository's own text (environments, caches, build and run outputs)
SKIP_DIRS = {".git", ".venv", ".nox", "__pycache__", "build", "dist", "runs", "node_modules", ".pytest_cache"}
#: a citation of a section: ``docs/math.md#<anchor>``, ``../../docs/design.md#<anchor>``, ``(math.md#<anchor>)``
CITATION = re.compile(r"(?<![\w-])(math|design)\.md#([\w-]+)")
#: a markdown heading: its level and title (trailing ``#``s dropped)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: inline code and link text kept, lowercase, punctuation dropped (letters,
    digits, ``_`` and ``-`` stay), each space a hyphen."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a markdown text outside fenced code, repeated titles suffixed ``-1``, ``-2`` as
    GitHub does."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        match = HEADING.match(line) if fence is None else None
        if match is None:
            continue
        slug = github_anchor(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def repository_text_files() -> Iterator[Path]:
    """The repository's text files (see ``TEXT_SUFFIXES``), skipping environments, caches and outputs."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info") and not d.startswith(".")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES:
                yield path


def citations() -> list[tuple[str, str, str]]:
    """(file relative to the root, cited doc, anchor) for every section citation in the repository."""
    out = []
    for path in repository_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            out.append((str(path.relative_to(ROOT)), f"{match.group(1)}.md", match.group(2)))
    return out


def test_github_anchor_follows_githubs_rule() -> None:
    assert github_anchor("Flow-GRPO loss") == "flow-grpo-loss"
    assert github_anchor("DPM-Solver++(2M)") == "dpm-solver2m"
    assert github_anchor("Convergence on shapes (`nox -s convergence`)") == "convergence-on-shapes-nox--s-convergence"
    assert github_anchor("The run directory (`[run] output_dir`)") == "the-run-directory-run-output_dir"
    assert anchors("# A\n## A\n```\n## B\n```\n## C\n") == {"a", "a-1", "c"}


def test_no_file_mentions_the_retired_notes() -> None:
    mentions = []
    for path in repository_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if any(name in line for name in RETIRED):
                mentions.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not mentions, "cite docs/math.md#<section> or docs/design.md#<section> instead:\n" + "\n".join(mentions)


def test_every_cited_section_exists() -> None:
    found = citations()
    assert len(found) > 50, "the citation pattern no longer finds the repository's citations"
    headings = {name: anchors(path.read_text(encoding="utf-8")) for name, path in DOCS.items()}
    broken = [f"{where}: {doc}#{anchor}" for where, doc, anchor in found if anchor not in headings[doc]]
    assert not broken, "no such heading in docs/ (GitHub anchors: lowercase, spaces as hyphens):\n" + "\n".join(broken)


@pytest.mark.parametrize("name", sorted(DOCS))
def test_links_inside_the_page_resolve(name: str) -> None:
    text = DOCS[name].read_text(encoding="utf-8")
    targets = re.findall(r"\]\(#([\w-]+)\)", text)
    missing = sorted(set(targets) - anchors(text))
    assert not missing, f"docs/{name} links sections it does not have: {missing}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_files_the_page_names_exist(name: str) -> None:
    """The page says where each formula is computed and tested; a moved module or test must move its mention."""
    text = DOCS[name].read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:core|plugins|tests|docs|contrib)/[\w./-]+\.(?:py|md|toml))`", text))
    assert name != "math.md" or len(named) > 20, "the file pattern no longer finds math.md's code and test paths"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"docs/{name} names files that do not exist: {missing}"


#: the modules that compute a formula of docs/math.md, and the section their docstring must cite
FORMULA_MODULES = {
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/samplers/flow_sde.py": "flow-sde-sampler",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/samplers/cps.py": "cps-sampler",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/samplers/ode.py": "ode-step",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/samplers/ode_solvers.py": "dpm-solver2m",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/samplers/window.py": "sde-window",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/advantage.py": "grpo-advantages",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/loss.py": "flow-grpo-loss",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/kl.py": "kl-to-the-reference",
    "plugins/omni-rl-dance-grpo/src/omni_rl_dance_grpo/sampler.py": "dancegrpo-sde-sampler",
    "plugins/omni-rl-grpo-guard/src/omni_rl_grpo_guard/ratio_norm.py": "grpo-guard-loss",
    "plugins/omni-rl-grpo-guard/src/omni_rl_grpo_guard/loss.py": "grpo-guard-loss",
    "plugins/omni-rl-flow-dppo/src/omni_rl_flow_dppo/trust_region.py": "flow-dppo-loss",
    "plugins/omni-rl-flow-dppo/src/omni_rl_flow_dppo/loss.py": "flow-dppo-loss",
    "plugins/omni-rl-dpo/src/omni_rl_dpo/loss.py": "diffusion-dpo-loss",
    "plugins/omni-rl-diffusion-nft/src/omni_rl_diffusion_nft/objective.py": "diffusionnft-loss",
    "plugins/omni-rl-awm/src/omni_rl_awm/loss.py": "awm-loss",
    "plugins/omni-rl-awm/src/omni_rl_awm/weighting.py": "awm-loss",
    "plugins/omni-rl-rewards/src/omni_rl_rewards/ocr_score.py": "ocr",
    "plugins/omni-rl-flow-grpo/src/omni_rl_flow_grpo/ppo.py": "flow-grpo-loss",
    "plugins/omni-rl-diffusion-nft/src/omni_rl_diffusion_nft/probability.py": "diffusionnft-loss",
    "plugins/omni-rl-diffusion-nft/src/omni_rl_diffusion_nft/decay.py": "diffusionnft-loss",
    "plugins/omni-rl-diffusion-nft/src/omni_rl_diffusion_nft/timesteps.py": "diffusionnft-loss",
    "plugins/omni-rl-awm/src/omni_rl_awm/timesteps.py": "awm-loss",
    "plugins/omni-rl-dpo/src/omni_rl_dpo/draws.py": "diffusion-dpo-loss",
    "plugins/omni-rl-dpo/src/omni_rl_dpo/pairing.py": "diffusion-dpo-loss",
    "plugins/omni-rl-rewards/src/omni_rl_rewards/jpeg.py": "jpeg-size",
    "plugins/omni-rl-rewards-clip/src/omni_rl_rewards_clip/pickscore.py": "clip-based-rewards",
    "plugins/omni-rl-rewards-clip/src/omni_rl_rewards_clip/clip_score.py": "clip-based-rewards",
    "plugins/omni-rl-rewards-clip/src/omni_rl_rewards_clip/hpsv2.py": "clip-based-rewards",
    "plugins/omni-rl-rewards-clip/src/omni_rl_rewards_clip/aesthetic.py": "clip-based-rewards",
    "plugins/omni-rl-geneval/src/omni_rl_geneval/rules.py": "geneval",
    "plugins/omni-rl-geneval/src/omni_rl_geneval/summary.py": "geneval",
    "core/omni_rl/engine/trajectory.py": "timestep-fraction",
    "core/omni_rl/train/advantages.py": "multi-reward-aggregation",
    "core/omni_rl/engine/rollout_correction.py": "rollout-correction",
}


@pytest.mark.parametrize(("module", "anchor"), sorted(FORMULA_MODULES.items()))
def test_formula_modules_cite_their_section(module: str, anchor: str) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / module).read_text(encoding="utf-8"))) or ""
    assert f"docs/math.md#{anchor}" in docstring, f"{module}'s docstring should cite docs/math.md#{anchor}"
