"""Shapes in motion, the text-to-video side of the benchmark: motion prompts and scenes (:mod:`.scenes`,
:mod:`.prompts`), the clip renderer (:mod:`.render`), the per-frame clip verifier (:mod:`.verify`) and the
``shapes_motion`` reward (:mod:`.config`, :mod:`.reward`).

Import-light like the package itself (``hooks.py`` imports :mod:`.config`): numpy and PIL load with the renderer and
the verifier.
"""
