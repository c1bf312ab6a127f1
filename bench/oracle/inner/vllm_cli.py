"""Runs INSIDE the oracle venv (imports vLLM). The `vllm serve` parser, built as vLLM's CLI builds it.

vllm/entrypoints/cli/main.py ``main()``: ``cli_env_setup()``, a top-level FlexibleArgumentParser
("vLLM CLI") with subparsers (dest "subparser"), and each subcommand's ``subparser_init``; for
serve that is ``ServeSubcommand.subparser_init`` = ``make_arg_parser`` (FrontendArgs.add_cli_args
+ AsyncEngineArgs.add_cli_args) on a subparser with vLLM's description, usage and epilog. Only the
serve subcommand is registered here (the others add their own subparsers, which do not change
serve's). The top parser's prog is "vllm", as for the console script, so the serve parser's prog is
"vllm serve" (vLLM's --task hint keys on it).
"""

from __future__ import annotations


def build_parsers():
    """(top-level parser, serve subparser, ServeSubcommand instance)."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.common.startup import VLLM_SUBCMD_PARSER_EPILOG, cli_env_setup
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    parser = FlexibleArgumentParser(
        prog="vllm",
        description="vLLM CLI",
        epilog=VLLM_SUBCMD_PARSER_EPILOG.format(subcmd="[subcommand]"),
    )
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmd = ServeSubcommand()
    serve_parser = cmd.subparser_init(subparsers)
    serve_parser.set_defaults(dispatch_function=cmd.cmd)
    return parser, serve_parser, cmd
