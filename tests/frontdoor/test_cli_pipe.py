"""A command whose output's reader goes away (`upgrade-bot exec check | head -1`) ends quietly
with 141, as a command a SIGPIPE ends: it said "could not connect: Broken pipe" and exit 1."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from bot.sim import SimCluster
from tests.support.bot_process import bot_command


def test_a_reader_that_went_away_ends_the_command_quietly_with_141(
    tmp_path: Path, sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
    env |= {
        "KUBECONFIG": str(sim_kubeconfig(sim_eks)),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path),
    }
    for command in (["exec", "check"], ["check"]):
        process = subprocess.Popen(
            [*bot_command(), *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        # The reader is gone before the command (a Python start-up away) writes its first line.
        assert process.stdout is not None
        process.stdout.close()
        _, err = process.communicate(timeout=120)
        assert (process.returncode, err) == (141, ""), command
