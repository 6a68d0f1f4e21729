"""GenEval's summary (``evaluation/summary_scores.py``) on hand-made results: a prompt is correct when any of its
images is, each tag is the fraction of its images that are correct, overall is the mean over tags (not images)."""

from __future__ import annotations

from omni_rl_geneval.summary import summarize

from omni_rl.benchmark import ImageResult


def result(index: int, sample: int, tag: str, correct: bool) -> ImageResult:
    return ImageResult(
        index=index,
        sample=sample,
        prompt=f"p{index}",
        metadata={"tag": tag},
        correct=correct,
        score=0.0,
        reason="",
        image="",
        seed=0,
    )


def test_the_numbers_are_summary_scores_py_s() -> None:
    """single_object: prompt 0, 4 of 4 images correct (1.0). counting: prompts 1-3, 3 of 12 correct, all in
    prompt 1 (0.25). Images: 7 / 16 = 43.75%; prompts correct (any image): 0 and 1 of 4 = 50%; overall: the
    mean of 1.0 and 0.25 = 0.625, where the image mean would be 0.4375."""
    results = [result(0, k, "single_object", True) for k in range(4)]
    results += [result(1, k, "counting", k < 3) for k in range(4)]
    results += [result(i, k, "counting", False) for i in (2, 3) for k in range(4)]
    summary = summarize(results)
    assert summary.overall == 0.625
    assert (summary.images, summary.prompts, summary.correct_images, summary.correct_prompts) == (16, 4, 7 / 16, 0.5)
    assert summary.text.splitlines() == [
        "Summary",
        "=======",
        "Total images: 16",
        "Total prompts: 4",
        "% correct images: 43.75%",
        "% correct prompts: 50.00%",
        "",
        "Task breakdown",
        "==============",
        "single_object    = 100.00% (4 / 4)",
        "counting         = 25.00% (3 / 12)",
        "",
        "Overall score (avg. over tasks): 0.62500",
    ]


def test_tags_are_listed_in_the_order_they_first_appear() -> None:
    results = [result(0, 0, "position", False), result(1, 0, "colors", True), result(2, 0, "position", True)]
    assert [row.name for row in summarize(results).rows] == ["position", "colors"]
