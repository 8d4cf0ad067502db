"""The terminal's progress lines: one per list, a bar only when the server gives a total, erased
when the command is done, and drawn without `rich`."""

from __future__ import annotations

import io
import subprocess
import sys

from bot.frontdoor.cli.progress import Display, progress_bar


def test_each_list_gets_its_line_with_a_bar_only_when_the_total_is_known() -> None:
    out = io.StringIO()
    display = Display(out)
    display("pods", 500, 2000)
    display("nodes", 10)
    display("pods", 2000, 2000)  # the last page is always drawn
    drawn = out.getvalue()
    assert "reading pods" in drawn
    assert "2000/2000" in drawn
    assert "#" * 10 in drawn  # the full bar
    nodes = [line for line in drawn.split("\r") if "reading nodes" in line]
    assert nodes
    assert all("#" not in line and "/" not in line.split("nodes", 1)[1].split()[0] for line in nodes)
    display.close()
    # Transient: the last thing written blanks the lines, so the command's result follows cleanly.
    assert out.getvalue().rstrip("\r").split("\r")[-1].strip() == ""


def test_no_display_when_standard_error_is_not_a_terminal_or_output_is_for_machines() -> None:
    with progress_bar() as shown:  # pytest captures standard error: not a terminal
        assert shown is None
    with progress_bar(quiet=True) as shown:
        assert shown is None


def test_the_display_imports_neither_rich_nor_pygments() -> None:
    code = (
        "import io, sys\n"
        "from bot.frontdoor.cli.progress import Display\n"
        "d = Display(io.StringIO()); d('pods', 1, 2); d.close()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'pygments', 'tqdm'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['tqdm']"
