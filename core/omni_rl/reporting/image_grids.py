"""Sample grids: each image with its prompt and score under it, a title over them, saved as PNG.

Captions wrap at word boundaries measured in pixels of the font actually drawn, never mid-word: a reader scanning
a grid for "a red circle left of a blue square" must be able to read every word. A word wider than a whole line
(a URL, a long identifier) is the one case that cannot wrap; it is shortened with an ellipsis instead of split.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

ELLIPSIS = "…"
LINES_PER_CAPTION = 4


def _fit(word: str, width: float, font: ImageFont.ImageFont | ImageFont.FreeTypeFont) -> str:
    """``word`` shortened with an ellipsis until it fits ``width`` pixels (kept whole when it fits)."""
    if font.getlength(word) <= width:
        return word
    while word and font.getlength(word + ELLIPSIS) > width:
        word = word[:-1]
    return word + ELLIPSIS


def wrap_caption(
    text: str, width: float, font: ImageFont.ImageFont | ImageFont.FreeTypeFont, max_lines: int = LINES_PER_CAPTION
) -> list[str]:
    """Lines of at most ``width`` pixels, broken only between words; at most ``max_lines``, the last one ending in
    an ellipsis when the text did not fit (still at a word boundary)."""
    lines: list[str] = []
    for word in text.split():
        if lines and font.getlength(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(_fit(word, width, font))
    if len(lines) <= max_lines:
        return lines
    kept = lines[:max_lines]
    last = kept[-1]
    while font.getlength(last + " " + ELLIPSIS) > width and " " in last:
        last = last.rsplit(" ", 1)[0]
    kept[-1] = (last + " " + ELLIPSIS) if font.getlength(last + " " + ELLIPSIS) <= width else ELLIPSIS
    return kept


def save_grid(
    path: Path,
    images: np.ndarray,
    captions: Sequence[str],
    *,
    columns: int = 8,
    min_cell: int = 128,
    title: str | None = None,
) -> Path:
    """Write ``images`` (N, H, W, 3) uint8 as a captioned grid; small images are upscaled (nearest) to be read.

    ``title`` (for example the step and the val-set seed) is drawn once above the grid.
    """
    grid = render_grid(images, captions, columns=columns, min_cell=min_cell, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    grid.save(tmp)
    tmp.replace(path)
    return path


def render_grid(
    images: np.ndarray,
    captions: Sequence[str],
    *,
    columns: int = 8,
    min_cell: int = 128,
    title: str | None = None,
) -> Image.Image:
    """The grid :func:`save_grid` writes, as a PIL image (a video's grid is one per frame:
    omni_rl.reporting.video_grids)."""
    n, h, w, _ = images.shape
    scale = max(1, min_cell // max(h, w))
    cell_w, cell_h = w * scale, h * scale
    font_size = max(9, min(12, cell_w // 12))
    font = ImageFont.load_default(size=font_size)
    line_h = font_size + 2
    text_h = LINES_PER_CAPTION * line_h + 4
    title_h = (font_size + 10) if title else 0
    columns = max(1, min(columns, n))
    rows = (n + columns - 1) // columns
    grid = Image.new("RGB", (columns * cell_w, title_h + rows * (cell_h + text_h)), "white")
    draw = ImageDraw.Draw(grid)
    if title:
        title_font = ImageFont.load_default(size=font_size + 2)
        draw.text((4, 3), _fit(title, columns * cell_w - 8, title_font), fill="black", font=title_font)
    for k in range(n):
        r, c = divmod(k, columns)
        x0, y0 = c * cell_w, title_h + r * (cell_h + text_h)
        tile = Image.fromarray(images[k]).resize((cell_w, cell_h), Image.NEAREST)
        grid.paste(tile, (x0, y0))
        caption = captions[k] if k < len(captions) else ""
        for i, line in enumerate(wrap_caption(caption, cell_w - 4, font)):
            draw.text((x0 + 2, y0 + cell_h + 2 + i * line_h), line, fill="black", font=font)
    return grid


def beside_sources(images: np.ndarray, conditions: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Each sample's condition images (an edit's source) to the left of its output, one cell per sample, so a
    grid reads "source → result". ``images``: (N, H, W, 3), or a video's (N, F, H, W, 3) (the sources repeat over
    its frames). Each source is fitted into H x W (aspect kept, black bars); a sample with fewer sources than the
    most in the batch gets black panels. Without conditions the images come back as they are."""
    array = np.asarray(images)
    panels = max((len(c) for c in conditions), default=0)
    if not panels:
        return array
    h, w = array.shape[-3], array.shape[-2]
    rows = []
    for k, sources in enumerate(conditions):
        fitted = [_fit_into(source, h, w) for source in sources]
        fitted += [np.zeros((h, w, 3), dtype=np.uint8)] * (panels - len(fitted))
        left = np.concatenate(fitted, axis=1)
        if array.ndim == 5:
            left = np.broadcast_to(left, (array.shape[1], *left.shape))
        rows.append(np.concatenate([left, array[k]], axis=-2))
    return np.stack(rows)


def _fit_into(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` scaled to fit ``height`` x ``width`` (aspect kept), centred on black."""
    source = Image.fromarray(np.asarray(image, dtype=np.uint8))
    scale = min(height / source.height, width / source.width)
    size = (max(1, round(source.width * scale)), max(1, round(source.height * scale)))
    canvas = Image.new("RGB", (width, height))
    canvas.paste(source.resize(size, Image.Resampling.BILINEAR), ((width - size[0]) // 2, (height - size[1]) // 2))
    return np.asarray(canvas, dtype=np.uint8)
