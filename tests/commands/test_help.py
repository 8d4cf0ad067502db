"""`/upgrade help` is generated from docstrings; unknown subcommands get "did you mean"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.core.command import split_words
from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings


def handle(config: Path, text: str, user: str = "U0PRIMARY") -> tuple[bool, str]:
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(CommandRequest(text=text, user_id=user, source="terminal"))
        return outcome.ok, outcome.rendered.text
    finally:
        services.close()


def test_help_lists_every_subcommand_with_its_docstring_summary(write_config: Callable[..., Path]) -> None:
    services = assemble(load_settings(write_config(), {}), with_slack=False)
    try:
        text = services.router.handle(CommandRequest(text="help", user_id="U1")).rendered.text
        for sub in services.registry:
            assert f"/upgrade {sub.name}" in text
            assert sub.summary in text
    finally:
        services.close()


def test_help_for_one_subcommand_shows_its_whole_docstring(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "help audit")
    assert ok
    assert "--since" in text
    assert "Only people in the roster" in text
    assert "anyone in the roster" in text


def test_an_unknown_subcommand_suggests_the_nearest(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "audti")
    assert not ok
    assert "did you mean `audit`" in text
    assert "ref " in text


def test_bad_arguments_show_usage_not_a_traceback(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "audit --since")
    assert not ok
    assert "Usage: `/upgrade audit [RUN] [--since WHEN]`" in text
    assert "Traceback" not in text


def test_an_empty_command_shows_help(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "   ")
    assert ok
    assert "/upgrade help" in text


def test_schedule_lists_its_verbs_and_each_verb_has_its_own_usage_and_help(
    write_config: Callable[..., Path],
) -> None:
    ok, text = handle(write_config(), "help schedule")
    assert ok
    for usage in ("/upgrade schedule list", "/upgrade schedule cancel", "/upgrade schedule move"):
        assert usage in text
    ok, text = handle(write_config(), "help schedule move")
    assert ok
    assert "Postpone a pending schedule" in text
    assert "--at" in text
    assert "--reason" in text
    ok, text = handle(write_config(), "help schedule frobnicate")
    assert not ok
    assert "no verb `frobnicate`" in text
    assert "`move`" in text


def test_a_verb_with_missing_arguments_gets_its_own_usage(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "schedule cancel")
    assert not ok
    assert "/upgrade schedule cancel" in text
    assert "ID" in text


def test_the_list_is_one_line_per_subcommand_with_its_first_sentence_and_nothing_cut(
    write_config: Callable[..., Path],
) -> None:
    services = assemble(load_settings(write_config(), {}), with_slack=False)
    try:
        text = services.router.handle(CommandRequest(text="help", user_id="U1")).rendered.text
        subs = list(services.registry)
    finally:
        services.close()
    head, *lines = text.splitlines()
    assert "/upgrade help COMMAND" in head
    assert len(lines) == len(subs)
    for line, sub in zip(lines, subs, strict=True):
        # `/upgrade NAME …` in one code span, then the docstring's whole first sentence.
        assert line == f"• `{sub.short_usage}` — {sub.summary}"
        assert line.count("`/upgrade ") == 1
        assert sub.summary.endswith((".", ")")), sub.summary
    choose = next(line for line in lines if "/upgrade choose" in line)
    assert choose.endswith("(a drain past its timeout: wait, delete or skip; an abort's offer to uncordon).")


def test_help_for_one_subcommand_lists_its_arguments_and_an_example(
    write_config: Callable[..., Path],
) -> None:
    ok, text = handle(write_config(), "help action")
    assert ok
    usage = text.splitlines()[0]
    assert usage == "*`/upgrade action KIND [PARAMS …] [--cluster NAME] [--dry-run] [--reason TEXT …]`*"
    assert (
        "\n*Arguments*\n• `KIND` — one of cordon, uncordon, drain, restart, delete-pod, set-image, "
        "flux-suspend, flux-resume, argocd-pause, argocd-resume\n" in text
    )
    assert "• `--dry-run` — list what would happen; change nothing" in text
    assert '*Example*\n• `/upgrade action cordon node=ip-10-0-1-7 --reason "bad disk"`' in text
    # The docstring's lines are joined: a code span is never broken by its line wrapping.
    assert "`… cordon nodegroup=istio version=1.25.16 …`" in text


def test_every_subcommand_and_verb_has_an_example_that_its_own_parser_accepts(
    write_config: Callable[..., Path],
) -> None:
    services = assemble(load_settings(write_config(), {}), with_slack=False)
    try:
        for top in services.registry:
            for sub in (top, *top.verbs.values()):
                assert sub.examples, f"/upgrade {sub.name} has no `Example:` in its docstring"
                for example in sub.examples:
                    slash, name, *words = split_words(example)
                    assert slash == "/upgrade"
                    resolved = services.registry.resolve(name, words)
                    assert resolved is not None, example
                    found, rest = resolved
                    assert found is sub, example
                    found.parser.parse_args(rest)  # raises UsageError if the example is wrong
                for written, meaning in sub.arguments:
                    assert meaning, f"/upgrade {sub.name} {written} has no help text"
    finally:
        services.close()


def test_a_usage_error_shows_the_usage_on_one_line(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "watch --for")
    assert not ok
    (usage,) = [line for line in text.splitlines() if line.startswith("Usage:")]
    assert usage == (
        "Usage: `/upgrade watch [--cluster NAME] [--nodegroup NODEGROUP] [--namespace NAMESPACE] "
        "[--for DURATION] [--channel CHANNEL]`"
    )


def test_help_says_who_may_change_a_run_as_the_run_decides(write_config: Callable[..., Path]) -> None:
    # The run's own roster decides, not the workspace (the reference said "anyone in the workspace").
    ok, text = handle(write_config(), "help pause")
    assert ok
    assert "_Who may run it: anyone in the run's roster (its plan's roster, with the run's handoffs)_" in text
    ok, text = handle(write_config(), "help skip")
    assert "one person per role of the step's gate, as the gate counts approvals" in text
    reference = (Path(__file__).parents[2] / "docs" / "reference" / "slash-commands.md").read_text()
    assert reference.count("Who may run it: anyone in the run's roster") == 4  # abort, note, pause, resume
