"""The ``omni-rl`` command: ``run``, ``check``, ``export``, ``eval``, ``compare``, ``verify``, ``serve-reward``
and ``plugins``.

Exit codes: 0 success; 2 a config or usage error (including plugin conflicts and unknown components), which
the user fixes by editing something; 1 a failure at run time. Tracebacks are shown only with ``--debug``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from omni_rl.cli.output import Output
from omni_rl.errors import OmniRLError
from omni_rl.registry import Registry

Handler = Callable[[argparse.Namespace, Output, Registry], int]


def build_parser() -> argparse.ArgumentParser:
    from omni_rl.cli.eval_cmd import add_eval_parser
    from omni_rl.config import core_version

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of errors")
    parser = argparse.ArgumentParser(
        prog="omni-rl",
        description="RL fine-tuning of text-to-image flow-matching models, extended by plugins.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"omni-rl {core_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    overrides = argparse.ArgumentParser(add_help=False)
    overrides.add_argument("config", metavar="CONFIG", help="a TOML config file")
    overrides.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one value, e.g. --set optim.lr=1e-4 --set reward.0.weight=2 (repeatable)",
    )

    run = commands.add_parser("run", parents=[common, overrides], help="train with a config")
    run.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    run.set_defaults(handler="run")

    check = commands.add_parser(
        "check", parents=[common, overrides], help="load the plugins and validate a config without training"
    )
    check.set_defaults(handler="check")

    export = commands.add_parser(
        "export", parents=[common], help="write a run's LoRA (or the merged pipeline) for use without omni-rl"
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (the [run] output_dir of a training run)")
    export.add_argument("--step", type=int, metavar="N", help="the checkpoint step to export (default: the latest)")
    export.add_argument("--out", required=True, metavar="DIR", help="where to write; must be new or empty")
    export.add_argument(
        "--merged",
        action="store_true",
        help="write the whole pipeline with the LoRA merged into its weights (DiffusionPipeline.from_pretrained)",
    )
    export.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a value of the run's config, e.g. --set model.options.path=DIR when the base model moved",
    )
    export.set_defaults(handler="export")

    compare = commands.add_parser(
        "compare", parents=[common], help="overlay several runs' reward curves and print a summary of each"
    )
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories ([run] output_dir)")
    compare.add_argument("--out", default="compare.png", metavar="PNG", help="where to write the overlay")
    compare.add_argument("--ema", type=float, default=0.9, metavar="F", help="EMA factor of the train reward")
    compare.set_defaults(handler="compare")

    verify = commands.add_parser(
        "verify", parents=[common], help="check every checkpoint of a run against its manifest (exit 1 if damaged)"
    )
    verify.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (the [run] output_dir of a training run)")
    verify.set_defaults(handler="verify")

    serve_reward = commands.add_parser(
        "serve-reward",
        parents=[common],
        help="serve installed rewards over HTTP (Ray Serve) for the http reward of other runs, until Ctrl-C",
    )
    serve_reward.add_argument("config", metavar="CONFIG", help="a serve config: [server] and [[reward]] tables")
    serve_reward.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override one value, e.g. --set server.port=8001"
    )
    serve_reward.set_defaults(handler="serve-reward")

    add_eval_parser(commands, common)

    plugins = commands.add_parser("plugins", parents=[common], help="list the installed plugins")
    plugins.add_argument("--components", action="store_true", help="list each plugin's components")
    plugins.add_argument("--json", action="store_true", help="print a JSON array, one object per plugin")
    plugins.set_defaults(handler="plugins")
    return parser


def _handler(name: str) -> Handler:
    # imported per command, so `omni-rl plugins` does not import the config machinery
    if name == "plugins":
        from omni_rl.cli.plugins_cmd import plugins_command

        return plugins_command
    if name == "serve-reward":
        from omni_rl.cli.serve_cmd import serve_reward_command

        return serve_reward_command
    if name == "compare":
        from omni_rl.cli.compare_cmd import compare_command

        return compare_command
    if name == "verify":
        from omni_rl.cli.verify_cmd import verify_command

        return verify_command
    if name == "eval":
        from omni_rl.cli.eval_cmd import eval_command

        return eval_command
    if name == "export":
        from omni_rl.cli.export_cmd import export_command

        return export_command
    from omni_rl.cli.run_cmd import check_command, run_command

    return check_command if name == "check" else run_command


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code (tests call it directly)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors (argparse exits with 2)
        return exc.code if isinstance(exc.code, int) else 0
    output = Output(debug=getattr(args, "debug", False))
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        from omni_rl import get_registry

        return _handler(args.handler)(args, output, get_registry())
    except OmniRLError as exc:
        output.error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        output.err.print("interrupted")
        return 130
    except Exception as exc:
        output.unexpected(exc)
        return 1
