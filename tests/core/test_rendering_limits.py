"""The sandbox bounds a template's work: time, sizes, recursion; every failure names file and line."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import pytest

from bot.core import rendering
from bot.core.announcements.templates import AnnouncementRenderer, sample_context
from bot.core.rendering import MAX_OUTPUT, MAX_RANGE, Renderer
from bot.errors import TemplateError
from tests.support.hostile_templates import CASES, Hostile


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_override_fails_fast_naming_its_file_line_and_reason(tmp_path: Path, case: Hostile) -> None:
    blamed = case.write(tmp_path)
    started = time.monotonic()
    with pytest.raises(TemplateError) as caught:
        AnnouncementRenderer(tmp_path).render(case.template, sample_context())
    assert time.monotonic() - started < 10
    message = caught.value.user_message
    assert message.startswith(f"{blamed}:{case.line}: "), message
    assert case.reason in message
    assert "\n" not in message
    assert len(message) < 400


def test_python_s_recursion_limit_is_left_as_it_was(tmp_path: Path) -> None:
    before = sys.getrecursionlimit()
    (tmp_path / "loop.txt.j2").write_text("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}")
    with pytest.raises(TemplateError, match="nested too deeply"):
        Renderer([tmp_path]).render("loop", {})
    assert sys.getrecursionlimit() == before


def test_the_renderer_still_works_after_a_template_ran_out_of_time(tmp_path: Path) -> None:
    (tmp_path / "slow.txt.j2").write_text(
        "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}"
        "{% endfor %}{% endfor %}{% endfor %}"
    )
    (tmp_path / "fine.txt.j2").write_text("{% for i in range(3) %}{{ i }}{% endfor %}")
    renderer = Renderer([tmp_path])
    with pytest.raises(TemplateError, match="took longer than"):
        renderer.render("slow", {})
    # The deadline belonged to that render alone.
    assert renderer.render("fine", {}).text == "012"


def test_work_within_the_limits_still_renders(tmp_path: Path) -> None:
    (tmp_path / "busy.txt.j2").write_text(
        "{{ range(MAX) | list | length }} {{ lipsum(2, html=False) | length > 0 }} "
        "{{ ('ab' * 1000) | length }} {{ ([1, 2] + [3]) | length }} {{ 2 ** 64 }} "
        "{{ '%05d' % 42 }} {{ '{:>6}'.format('x') }} {{ ['a', 'b'] | join('-') }} "
        "{{ 'a-b' | replace('-', '+') }} {% set ns = namespace(n=0) %}"
        "{% for i in range(100) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"
    )
    text = Renderer([tmp_path]).render("busy", {"MAX": MAX_RANGE}).text
    assert text == f"{MAX_RANGE} True 2000 3 18446744073709551616 00042      x a-b a+b 4950"


def test_output_exactly_at_the_cap_renders_and_one_more_character_does_not(tmp_path: Path) -> None:
    (tmp_path / "big.txt.j2").write_text("{% for i in range(n) %}{{ 'x' * 1000 }}{% endfor %}{{ tail }}")
    renderer = Renderer([tmp_path])
    assert len(renderer.render("big", {"n": MAX_OUTPUT // 1000, "tail": ""}).text) == MAX_OUTPUT
    with pytest.raises(TemplateError, match="output longer than"):
        renderer.render("big", {"n": MAX_OUTPUT // 1000, "tail": "y"})


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{ 'x'.center(10**9) }}", "a number argument of 1,000,000,000"),
        ("{{ 'x' | center(10**9) }}", "a number argument of 1,000,000,000"),
        ("{{ ('x' * 100000).replace('x', 'yyyyyyyyyy') }}", "(at most 200,000)"),
        ("{{ [('x' * 100000)] * 1000 }}", "(at most 200,000)"),
        ("{{ (['x' * 1000] * 200) | join('y' * 1000) }}", "(at most 200,000)"),
        ("{{ '%1000000000d' % 1 }}", "a format width of 1,000,000,000"),
        ("{{ '{:>1000000000}'.format(1) }}", "a format width of 1,000,000,000"),
        ("{{ 2 ** (10 ** 9) }}", "a number of more than 4,096 bits"),
        ("{{ ('line\\n' * 1000) | indent(100000) }}", "(at most 200,000)"),
        ("{{ [1] | batch(10**9, 0) | list }}", "a number argument of 1,000,000,000"),
    ],
)
def test_other_ways_to_build_something_huge_are_refused_before_they_are_built(
    tmp_path: Path, source: str, reason: str
) -> None:
    (tmp_path / "huge.txt.j2").write_text("fine\n" + source)
    started = time.monotonic()
    with pytest.raises(TemplateError) as caught:
        Renderer([tmp_path]).render("huge", {})
    assert time.monotonic() - started < 5
    assert caught.value.user_message.startswith(f"{tmp_path / 'huge.txt.j2'}:2: ")
    assert reason in caught.value.user_message


class _Starved:
    """A value whose printing waits 1.2 s without computing: what a render on a busy or
    CPU-throttled machine looks like to the clock."""

    def __str__(self) -> str:
        time.sleep(1.2)
        return "late"


def test_a_render_that_waits_rather_than_works_is_not_cut_off(tmp_path: Path) -> None:
    # The limit is the thread's CPU time: a loaded pod (a CPU limit's throttling, a busy node)
    # slows the clock's view of a render, and that must not drop an announcement.
    (tmp_path / "waits.txt.j2").write_text("{{ value }} {% for i in range(3) %}{{ i }}{% endfor %}")
    assert Renderer([tmp_path]).render("waits", {"value": _Starved()}).text == "late 012"


class _Collects:
    """A value whose printing runs a full garbage collection of a large heap (`rounds` times)."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def __str__(self) -> str:
        for _ in range(self.rounds):
            gc.collect()
        return "collected"


class _Burns:
    """A value whose printing burns `seconds` of this thread's CPU time outside the collector."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __str__(self) -> str:
        until = time.thread_time() + self.seconds
        while time.thread_time() < until:
            pass
        return "burnt"


def test_time_the_garbage_collector_spends_during_a_render_is_not_the_template_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full collection runs in whichever thread allocates when it is due; in a large process it
    # takes longer than the bound (a CI worker's announcement render did, at 1 s). Here the bound is
    # shrunk instead of the heap grown: a heap of a million objects takes tens of ms to collect.
    # What the test process held before is frozen out of the collections (a pytest-xdist worker's
    # heap, after hundreds of tests, made each collection seconds long), so the heap is this one.
    gc.freeze()
    try:
        heap = [[i] for i in range(1_000_000)]
        started = time.thread_time()
        gc.collect()
        one_collection = time.thread_time() - started
        monkeypatch.setattr(rendering, "MAX_RENDER_SECONDS", one_collection / 2)
        (tmp_path / "one.txt.j2").write_text("{{ value }}")
        renderer = Renderer([tmp_path])
        assert renderer.render("one", {"value": _Collects(rounds=3)}).text == "collected"
        # The same CPU time spent outside the collector is still the template's.
        with pytest.raises(TemplateError, match="took longer than"):
            renderer.render("one", {"value": _Burns(seconds=one_collection * 3)})
        assert len(heap) == 1_000_000
    finally:
        gc.unfreeze()


def test_the_collector_s_clock_runs_only_while_a_render_does(tmp_path: Path) -> None:
    # Every collection calls the callbacks, the young generation's thousands of times a second in
    # a process that allocates: outside renders nothing is timed.
    seen: list[bool] = []

    class Looks:
        def __str__(self) -> str:
            seen.append(rendering._on_collect in gc.callbacks)
            return "x"

    (tmp_path / "one.txt.j2").write_text("{{ value }}")
    assert rendering._on_collect not in gc.callbacks
    Renderer([tmp_path]).render("one", {"value": Looks()})
    assert seen == [True]
    assert rendering._on_collect not in gc.callbacks


def test_a_render_reads_the_cpu_clock_only_when_its_budget_could_be_spent(tmp_path: Path) -> None:
    # The clock is checked at each of the template's thousands of operations; the CPU clock is a
    # system call, ten times the wall clock's price, and reading it at each was a few percent of a
    # rehearsal's CPU. A render of milliseconds cannot have spent a budget of a second.
    (tmp_path / "busy.txt.j2").write_text("{% for i in range(5000) %}{{ i }}{{ values.x }}{% endfor %}")
    renderer = Renderer([tmp_path])
    reads = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal reads
        if event == "c_call" and arg is time.thread_time:
            reads += 1

    # The collector's own clock (`_collecting`) is not what is counted here.
    gc.disable()
    sys.setprofile(count)
    try:
        text = renderer.render("busy", {"values": {"x": ""}}).text
    finally:
        sys.setprofile(None)
        gc.enable()
    assert text.startswith("01234")
    assert reads < 10, f"{reads} readings of the CPU clock for about 20,000 checks"
