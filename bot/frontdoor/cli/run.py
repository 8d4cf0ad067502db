"""`upgrade-bot run [--http [--host H] [--port N]] [--health-port N]`: serve Slack (Socket Mode
unless --http). Its lifecycle (recovery, triggers, the transport, shutdown) is
`bot.frontdoor.serve`."""

from __future__ import annotations

import argparse

from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, common_options
from bot.frontdoor.serve import serve
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    run = subparsers.add_parser(
        "run", parents=[common_options()], help="serve Slack: Socket Mode, or HTTP with --http"
    )
    run.add_argument("--http", action="store_true", help="serve the Events API endpoint over HTTP")
    run.add_argument("--host", default="0.0.0.0", help="address to listen on with --http (default 0.0.0.0)")
    run.add_argument(
        "--port", type=int, default=3000, help="port for --http; 0 picks a free one (default 3000)"
    )
    run.add_argument(
        "--health-port",
        type=int,
        metavar="N",
        help=(
            "serve /healthz, /readyz and /metrics on this port and thread of their own (either mode;"
            " with --http also on --port); 0 picks a free one"
        ),
    )
    return configured(_run, log_level="INFO")


def _run(settings: Settings, args: argparse.Namespace) -> int:
    serve(settings, http=args.http, host=args.host, port=args.port, health_port=args.health_port)
    return EXIT_OK
