"""Reward servers omni-rl starts and stops itself for a run (``server = {...}`` on ``vlm_judge``).

- :mod:`.config`: the ``server`` table (engine, model, GPUs, replicas, extra arguments).
- :mod:`.command`: the server's command line and environment (vLLM's OpenAI-compatible server, or any command).
- :mod:`.guard`: the small parent process each server runs under, which kills the server's process group when
  its owner goes away (no orphan holding a GPU after a crash or a ``ray.kill``).
- :mod:`.process`: one server process: a free port, its log, readiness, its last error, stop.
- :mod:`.actor`: that process inside a Ray actor on the resources asked for.
- :mod:`.pool`: the replicas of one reward: started together, requests spread over them, a dead one restarted.
"""
