"""Preset prompt templates of ``vlm_judge``, each with the parser that reads its answer.

``{prompt}`` is replaced by the generation prompt (plain substitution: other braces in a template stay as
they are). The alignment and quality presets follow UnifiedReward's pointwise image scoring (a rationale,
then "Final Score:" on a 1-5 scale); "ocr" asks the VLM to read the text back, which the OCR formula of the
``ocr`` reward then scores against the prompt's quoted text (VeRL-Omni's OCR-by-VLM reward). The edit presets
ask about a source and its edit, both sent in the message ("Source image:", then "Edited image:"): whether the
edit follows the instruction, and whether it keeps what the instruction does not touch, each a yes/no question
(the two questions of Flow-Factory's consistent_editing, best scored with ``score = "yes_prob"``).
"""

from __future__ import annotations

import attrs

from omni_rl.errors import ConfigError


@attrs.frozen
class Template:
    text: str
    parser: str
    #: the template asks about the source image(s) of an edit: the judge is sent them (``with_source``)
    with_source: bool = False


PRESETS: dict[str, Template] = {
    "alignment": Template(
        "You are given an image generated from the text caption below. Judge how faithfully the image depicts "
        "the caption: every object, count, attribute (colour, shape, size), spatial relation and piece of text "
        "it asks for. Ignore aesthetics unless the caption asks for them.\n"
        "Caption: {prompt}\n"
        "First explain briefly what matches the caption and what does not. Then give the alignment score on a "
        "scale of 1 (unrelated) to 5 (everything depicted exactly), on a last line of the form\n"
        "Final Score: <1-5>",
        "scale_1_5",
    ),
    "quality": Template(
        "You are given an image generated from the text caption below. Judge its visual quality alone: "
        "sharpness, coherent anatomy and structure, absence of artifacts and distortions, lighting, composition "
        "and aesthetic appeal. Do not judge whether it matches the caption.\n"
        "Caption: {prompt}\n"
        "First explain briefly the strengths and flaws you see. Then give the quality score on a scale of 1 "
        "(severely flawed) to 5 (flawless, professional), on a last line of the form\n"
        "Final Score: <1-5>",
        "scale_1_5",
    ),
    "matches": Template(
        "Does this image show the following? {prompt}\nAnswer with one word: yes or no.",
        "yes_no",
    ),
    "ocr": Template(
        "Read all the text that appears in this image. Reply with that text only, exactly as written, in "
        "reading order, without quotes or comments. If the image shows no text, reply with nothing.",
        "ocr",
    ),
    "edit_instruction": Template(
        "The source image was edited with the instruction below, giving the edited image. Does the edited image "
        "follow the instruction: does it make the change the instruction asks for?\n"
        "Instruction: {prompt}\n"
        "Answer with one word: yes or no.",
        "yes_no",
        with_source=True,
    ),
    "edit_consistency": Template(
        "The source image was edited with the instruction below, giving the edited image. Apart from the change "
        "the instruction asks for, is the edited image consistent with the source image: the same subjects and "
        "identities, layout, background and style, with nothing else changed?\n"
        "Instruction: {prompt}\n"
        "Answer with one word: yes or no.",
        "yes_no",
        with_source=True,
    ),
}


def template_problem(template: str, parser: str, score: str = "parse") -> str | None:
    """Why ``template`` with ``parser`` cannot be used, or None. A template of one's own must contain {prompt}
    (unless it reads text for the ocr parser, whose target comes from the prompt anyway) and needs a parser
    (except under ``score = "yes_prob"``, which reads the answer's log-probs of yes and no instead)."""
    if score == "yes_prob":
        asks = parser or (PRESETS[template].parser if template in PRESETS else "yes_no")
        if asks != "yes_no":
            where = f"the preset {template!r}" if template in PRESETS and not parser else "options.parser"
            yes_no = ", ".join(f'"{name}"' for name, preset in PRESETS.items() if preset.parser == "yes_no")
            return (
                f'score = "yes_prob" scores a yes/no answer, but {where} reads a "{asks}" reply; use a yes/no '
                f'template ({yes_no}, or your own with no parser), or score = "parse"'
            )
        if template not in PRESETS and "{prompt}" not in template:
            return "a template of your own must contain {prompt} where the prompt goes"
        return None
    return _parse_problem(template, parser)


def _parse_problem(template: str, parser: str) -> str | None:
    if template in PRESETS:
        return None
    names = ", ".join(f'"{name}"' for name in PRESETS)
    if "{prompt}" not in template and parser != "ocr":
        return f"must be a preset ({names}) or a template of your own with {{prompt}} where the prompt goes"
    if not parser:
        return 'a template of your own needs options.parser ("number", "yes_no", "scale_1_5" or "ocr")'
    return None


def resolve_template(template: str, parser: str, score: str = "parse") -> Template:
    """The preset ``template`` names (``parser`` replacing its own when given), or a template of one's own."""
    problem = template_problem(template, parser, score)
    if problem is not None:
        raise ConfigError(f"vlm_judge options.template: {problem}", hint="docs/rewards.md lists the presets")
    if template in PRESETS:
        preset = PRESETS[template]
        return Template(preset.text, parser or preset.parser, preset.with_source)
    return Template(template, parser or ("yes_no" if score == "yes_prob" else ""))
