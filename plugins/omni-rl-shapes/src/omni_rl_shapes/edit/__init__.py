"""Shapes edit: editing tasks on rendered scenes with the target scene known exactly, the ``shapes_edit`` reward
(did the edit happen, was the rest preserved) and the ``shapes_edit`` benchmark of ``omni-rl eval``.

Modules: :mod:`.config` (the reward's options, attrs only), :mod:`.tasks` (source scenes, instructions and their
exact targets), :mod:`.make_tasks` (the reproducible train / val / test split files), :mod:`.reward`,
:mod:`.benchmark`. The shipped split lives in ``tasks/`` (``package:omni_rl_shapes:edit/tasks/val.jsonl``).
"""
