"""`upgrade-bot rehearse PLAN`: run a whole plan against the simulated cluster from a terminal.

The same run machinery as in Slack (store, gates, actions, card and thread), with a poster that
prints instead of posting and approvals answered at the prompt — or, with `--auto-approve`, by
the roster itself, each gate by the people it names (four eyes included). Steps with `rehearsal:`
hooks ask the sim, through its HTTP control endpoints, to play the outside world's part (the
pipeline replacing a node group) and wait for it. The bot never imports the simulator: the
terminal front door starts it and hands this module its URL and kubeconfig.

At a prompt, a user ID approves as that person, `reject REASON` rejects (plain `reject` asks for
the reason next), an empty line lets the roster answer, and `abort` stops the run. A refused
answer (the wrong role, a typo) prints the gate's reason and the question is asked again: only
`abort` or the end of input ends the rehearsal. A job's question (a drain a budget blocks) is
answered `OPTION [REASON]`; an answer that needs a reason (skipping a node) asks for it next.
With `interactive` (`--interactive`, the default at a terminal) a step that failed or was
interrupted pauses the run and the prompt offers what the roster would do in Slack: `skip
REASON` (resume, then skip the step on record), `resume` (a fresh gate: the step runs again once
approved) or `abort`. Without it, the rehearsal stops at such a step, as the run does.
PLAN is a plan file or the name of a built-in plan (`bot.resources.BUILTIN_PLANS`), so an
installed copy rehearses its examples from any directory. Exit status (`exit_status`): 0 when the
run completed with every step done, 3 when it completed with failed steps skipped, steps not all
done or past a safeguard people chose (a cloud's refusal overridden, evidence waived), or paused, 1 when
it was aborted or stopped at the end of input, 2 when the plan is invalid. The last line printed
says why (`last_line`): "… completed with 4 failed steps skipped", with each step named before it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, TextIO, cast

import yaml

from bot.adapters.store import Store
from bot.core.checks.findings import Cover
from bot.core.durations import format_duration
from bot.core.evidence.baseline import analysis_queries
from bot.core.jobs.base import Choice, ChoiceOption
from bot.core.jobs.service import JobService, choice_of
from bot.core.people import Directory, StaticDirectory, roles_of
from bot.core.rendering import mention, people
from bot.core.runs import machine as R
from bot.core.runs.cards import gate_key
from bot.core.runs.paused import ending
from bot.core.runs.plans import Plan, RehearsalHook, parse_plan, read_plan_file
from bot.core.runs.report import forced_past
from bot.core.runs.service import Actor, RunService
from bot.core.snapshots.projection import ClusterReader
from bot.errors import TemporaryError, UserError, clip
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.termtext import TerminalOut, TerminalText
from bot.frontdoor.textposter import TextPoster, framed
from bot.records import AksProvider, ClusterConfig, EksProvider, GkeProvider, ImageChecks
from bot.resources import BUILTIN_PLANS
from bot.settings import Settings, parse_settings


@dataclass(frozen=True, kw_only=True)
class Terminal:
    """Where a rehearsal prints and who answers what it asks: with `auto_approve` the roster
    itself, else the person at `ask`; with `interactive`, a failed or interrupted step offers
    skip / resume / abort at the prompt instead of stopping the rehearsal."""

    out: TextIO
    ask: Callable[[str], str]
    auto_approve: bool
    interactive: bool = False


def named(user_id: str, roster: Mapping[str, Sequence[str]], directory: Directory) -> str:
    """A person in the rehearsal's own lines as the bot's texts name them: a mention, which the
    terminal shows by the display name the bot knows, else as `@ID` (`termtext`), and the roles the
    roster gives them: "@U0PRIMARY (primary) answers job 7", never a bare id."""
    held = roles_of(user_id, roster, directory)
    roles = [role for role in roster if role in held]
    return f"{mention(user_id)} ({', '.join(roles)})" if roles else str(mention(user_id))


class SimControl:
    """The sim's control endpoints over HTTP (what a rehearsal hook asks for)."""

    #: The phase in which a node group update with `drain: external` has its new nodes Ready and
    #: waits for the old ones to be cordoned and drained — by the plan's own steps, which follow.
    WAITING_FOR_DRAIN = "waiting-for-drain"

    def __init__(self, url: str, timeout: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, wait: float = 30) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.url}/sim/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=wait + 10) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            with exc:
                said = exc.read(2000).decode("utf-8", "replace")
            if 400 <= exc.code < 500:
                # The sim answered and refused (a hook naming no such node group): its words.
                try:
                    why = str(json.loads(said).get("error") or said)
                except (ValueError, AttributeError):
                    why = said
                raise UserError(f"the simulated cluster refused {path}: {clip(why.strip(), 300)}") from None
            raise TemporaryError(f"the simulated cluster did not answer {path}: {exc}") from exc
        except OSError as exc:
            raise TemporaryError(f"the simulated cluster did not answer {path}: {exc}") from exc

    def set_speed(self, speed: float) -> None:
        """Run the sim's clock at `speed` simulated seconds per real second (0 freezes it)."""
        self._call("POST", "speed", {"speed": speed})

    def now(self) -> datetime:
        """The sim's simulated time."""
        return datetime.fromisoformat(str(self._call("GET", "status")["time"]))

    def advance(self, seconds: float) -> None:
        """Move the sim's clock `seconds` on at once, firing everything due on the way in order."""
        self._call("POST", "advance", {"seconds": seconds})

    def quiet_metrics(self, queries: Sequence[str]) -> list[str]:
        """Have the sim's Prometheus facade answer each of `queries` it has no answer for (it
        evaluates no PromQL: an unknown query is an empty result, which no analysis passes) with
        a quiet cluster's 0, so the plan's analyses measure through the facade. A value a scenario
        or a test set stays. The queries it set."""
        seeded = []
        for query in queries:
            url = f"{self.url}/prometheus/api/v1/query?" + urllib.parse.urlencode({"query": query})
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    answer = json.loads(resp.read() or b"null")
                if (answer or {}).get("data", {}).get("result"):
                    continue
                req = urllib.request.Request(
                    f"{self.url}/evidence/queries",
                    data=json.dumps({"query": query, "value": 0.0}).encode(),
                    method="POST",
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=30):
                    seeded.append(query)
            except (OSError, ValueError) as exc:
                raise TemporaryError(
                    f"the simulated cluster's Prometheus facade did not answer: {exc}"
                ) from exc
        return seeded

    def operations(self) -> list[dict[str, Any]]:
        """Every long-running action the sim has played, with its state, phase and step log."""
        return list(self._call("GET", "operations"))

    def play(self, hook: RehearsalHook) -> tuple[bool, str]:
        """Ask the sim to do it and wait; (did it succeed, a line for the thread).

        A `replace_node_group` hook with `drain: external` waits only until the new nodes are
        Ready: the old ones are left for the plan's own cordon and drain steps, and the sim ends
        each old instance once it is drained."""
        if hook.name == "advance":
            self._call("POST", "advance", {"seconds": hook.args["seconds"]})
            return True, f"sim: advanced {hook.args['seconds']}"
        external = hook.name == "replace_node_group" and hook.args.get("drain") == "external"
        if hook.name == "upgrade_control_plane":
            op = self._call("POST", "control-plane/upgrade", {"version": hook.args["version"]})
        else:
            body = {"version": hook.args["version"]}
            if "drain" in hook.args:
                body["drain"] = hook.args["drain"]
            op = self._call("POST", f"nodegroups/{hook.args['name']}/replace", body)
        until = f"&until={self.WAITING_FOR_DRAIN}" if external else ""
        done = self._call("GET", f"operations/{op['id']}?wait={self.timeout:g}{until}", wait=self.timeout)
        state = str(done.get("state", "unknown"))
        error = f": {done['error']}" if done.get("error") else ""
        what = f"{hook.name} {', '.join(f'{k}={v}' for k, v in hook.args.items())}"
        if external and state == "InProgress":
            if done.get("phase") == self.WAITING_FOR_DRAIN:
                return True, f"sim: {what} → new nodes Ready; waiting for the old nodes to be drained"
            return False, f"sim: {what} → new nodes not Ready after {self.timeout:g}s ({done.get('phase')})"
        return state.lower() in ("successful", "succeeded", "completed"), f"sim: {what} → {state}{error}"


def builtin_plan_names() -> list[str]:
    """The example plans shipped with the bot, by the name `rehearse` takes."""
    return sorted(p.stem for p in BUILTIN_PLANS.glob("*.yaml"))


def load_plan_file(name: str) -> tuple[Plan, str]:
    """A plan file by path, else a built-in plan by name (from any directory, installed or not)."""
    path = Path(name)
    if not path.is_file():
        path = BUILTIN_PLANS / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(builtin_plan_names()) or "none found"
        raise UserError(f"no plan file {name!r} (a path, or a built-in plan: {known})")
    text = read_plan_file(path)
    return parse_plan(text, source=str(path)), text


@contextmanager
def rehearsal_bot(
    settings: Settings,
    out: TextIO,
    *,
    directory: Directory,
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime],
    speed: float,
    text: TerminalText,
    fleet_children_in_turn: bool = False,
) -> Iterator[tuple[Services, TextIO, TextPoster]]:
    """The same bot as in Slack, with a text poster and the sims as its clusters, for a rehearsal
    (`rehearse`, `rehearse_fleet`): the bot, the stream it prints to (Slack's text rendered for a
    terminal as `text` says, `bot.frontdoor.termtext`) and its poster. Its duties are shut down
    and the bot closed when the rehearsal ends, however it ends. `fleet_children_in_turn`: assemble's
    (a fleet rehearsal creates each child's run as it plays it)."""
    # The bot's texts name a person's role next to the mention already: the roster is not needed.
    out = cast(TextIO, TerminalOut(out, text))
    poster = TextPoster(out)
    # The long actions (cluster jobs, watches) run on the duty engine's driver threads, as on the
    # triggers door.
    bot = assemble(
        settings,
        poster=poster,
        directory=directory,
        connect_cluster=connect_cluster,
        clock=clock,
        # The sim's clock runs `speed` times faster: a job's wait between ticks (an EKS update
        # polled every 10 s) is in its seconds, as its timeouts are.
        job_wait_scale=1.0 / speed if speed > 1 else 1.0,
        fleet_children_in_turn=fleet_children_in_turn,
    )
    # No timers here (nothing is scheduled, nobody else leads): this process is on its own, and
    # the long duties run at once, woken by the run (or the fleet) that starts them.
    bot.leadership.go_solo()
    bot.duties.start()
    try:
        yield bot, out, poster
    finally:
        bot.duties.shutdown()
        bot.close()


def window_opening_now(text: str, plan: Plan, now: datetime, *, whose: str = "the plan's") -> tuple[str, str]:
    """The plan's text with its window opening at `now` (the rehearsal's start), as long as the
    team wrote it and in its zone, and the line that says so (of `whose` window: a fleet's child
    names its cluster). A plan is rehearsed as it would run in its window, on whatever day: its
    written dates passed (or not yet come), every card said "window ended … 29 days ago" and the
    report had each step worked past its end. What a run that outlasts its window looks like is
    then the rehearsal's to show, as `schedule --at` moves a run's window on the day."""
    window = plan.window
    start = now.astimezone(window.zone).replace(second=0, microsecond=0, tzinfo=None)
    end = start + window.length
    # Only the window's own text changes, on as many lines as it had: the steps keep their line
    # numbers, which the run's messages cite.
    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)  # a plan that parsed is a mapping with a window
    node = next(v for k, v in root.value if k.value == "window")
    a, b = node.start_mark.index, node.end_mark.index
    flow = (
        f"{{start: {json.dumps(f'{start:%Y-%m-%dT%H:%M}')}, end: {json.dumps(f'{end:%Y-%m-%dT%H:%M}')}, "
        f"timezone: {json.dumps(window.timezone)}}}"
    )
    moved = text[:a] + flow + "\n" * text[a:b].count("\n") + text[b:]
    written = (
        f"{window.start.astimezone(window.zone):%Y-%m-%d %H:%M} – {window.end.astimezone(window.zone):%H:%M}"
    )
    said = (
        f"rehearsal: {whose} window ({written} {window.timezone}, {format_duration(window.length)}) "
        f"opens as the run starts: {start:%Y-%m-%d %H:%M} – {end:%H:%M} {window.timezone} on the sim's clock"
    )
    return moved, said


def rehearse(
    plan_name: str,
    *,
    sim_url: str,
    kubeconfig: Path,
    workdir: Path,
    auto_approve: bool,
    out: TextIO,
    eks: EksProvider | None = None,
    aks: AksProvider | None = None,
    gke: GkeProvider | None = None,
    ask: Callable[[str], str],
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    speed: float = 1.0,
    interactive: bool = False,
    ignores: Sequence[Cover] = (),
    report_dir: Path | None = None,
    plain: bool = False,
    zone: tzinfo | None = None,
    images: ImageChecks | None = None,
) -> int:
    """Run the plan to its end; the exit status is `exit_status`'s. `ignores` is the team's
    `checks.ignore` (from `--config`): the plan's check steps accept what it accepts, as they
    would on the day. With `report_dir`, the run's report (bot.core.runs.report: PNG, HTML,
    Markdown) is written there and its path printed. `eks` is the sim's EKS cluster when its
    scenario has a cloud: the plan's cluster gets it as its provider (the EKS checks and actions
    then call the sim's AWS APIs); `aks` likewise, with the sim's ARM surface; `gke`, its GKE REST surface. What is printed is Slack's text rendered for a terminal
    (`bot.frontdoor.termtext`: dates in `zone`, the default the local one, emoji as
    characters), or as ASCII with `plain`. With `images` whose `verify` is on (the team's
    `checks.images`), the plan's check steps run IMG001 against the sim's registry facade."""
    if interactive and auto_approve:
        raise UserError("--interactive asks people; --auto-approve lets the roster answer: pick one")
    plan, text = load_plan_file(plan_name)
    provider = ""
    if eks is not None:
        endpoint = f", endpoint_url: {json.dumps(eks.endpoint_url)}" if eks.endpoint_url else ""
        provider = f", provider: {{eks: {{name: {json.dumps(eks.name)}, region: {json.dumps(eks.region)}{endpoint}}}}}"
    elif aks is not None:
        endpoint = f", endpoint_url: {json.dumps(aks.endpoint_url)}" if aks.endpoint_url else ""
        provider = (
            f", provider: {{aks: {{subscription_id: {json.dumps(aks.subscription_id)}, "
            f"resource_group: {json.dumps(aks.resource_group)}, name: {json.dumps(aks.name)}{endpoint}}}}}"
        )
    elif gke is not None:
        endpoint = f", endpoint_url: {json.dumps(gke.endpoint_url)}" if gke.endpoint_url else ""
        provider = (
            f", provider: {{gke: {{project: {json.dumps(gke.project)}, location: {json.dumps(gke.location)}, "
            f"name: {json.dumps(gke.name)}{endpoint}}}}}"
        )
    settings = parse_settings(
        # The sim's Alertmanager and Prometheus facades stand in for the cluster's own, so a plan's
        # `alerts` steps rehearse without the real binaries.
        f"data_dir: {workdir}\nclusters:\n  {plan.cluster}: {{kubeconfig: {kubeconfig}, context: sim{provider}, "
        f"alertmanager: {{url: {json.dumps(sim_url + '/alertmanager')}}}, "
        f"prometheus: {{url: {json.dumps(sim_url + '/prometheus')}}}}}\n",
        source=workdir / "rehearsal.yaml",
        env={},
    )
    settings = replace(settings, check_ignores=tuple(ignores))
    if images is not None and images.verify:
        # IMG001 as the team runs it, but every registry is the sim's /v2 facade: it has the
        # images the scenario runs, not the ones nobody pushed (the next kube-proxy).
        settings = replace(settings, image_checks=ImageChecks(verify=True, endpoints={"*": sim_url}))
    settings = replace(
        settings, channels=replace(settings.channels, operations=plan.operations_channel or "CREHEARSAL")
    )
    # No Slack here: each user group of the roster stands for three made-up members, so gates that
    # need a group (a quorum of the mesh team) can be rehearsed too.
    groups = {e for people in plan.roster.values() for e in people if e.startswith("S")}
    shown = TerminalText(zone=zone, plain=plain)
    with rehearsal_bot(
        settings,
        out,
        directory=StaticDirectory({g: [f"{g}-member-{i}" for i in (1, 2, 3)] for g in groups}),
        connect_cluster=connect_cluster,
        clock=clock,
        speed=speed,
        text=shown,
    ) as (bot, out, poster):
        store, service, jobs = bot.store, bot.runs, bot.jobs
        sim = SimControl(sim_url)
        for query in sim.quiet_metrics(
            analysis_queries(call for step in plan.steps for call in (*step.actions, *step.background))
        ):
            out.write(f"sim: the Prometheus facade answers {query} with 0 (a quiet cluster)\n")
        text, opened = window_opening_now(text, plan, clock())
        out.write(opened + "\n")
        store.save_plan(name=plan.name, text=text, loaded_by="rehearsal", loaded_at=clock())
        starter = next(iter(plan.roster.values()))[0]
        run = service.start(plan.name, Actor(user_id=starter, source="terminal")).run
        # A prompt quotes the bot's texts (a job's question): rendered as the rest is (`--plain`).
        term = Terminal(
            out=out, ask=lambda prompt: ask(shown(prompt)), auto_approve=auto_approve, interactive=interactive
        )
        run = play_run(service, jobs, run, sim, term)
        out.write(framed(poster.card))
        if report_dir is not None:
            for path in write_report(store, run.id, report_dir, now=clock()):
                out.write(f"report: {path}\n")
            from bot.adapters.charts import INSTALL_HINT
            from bot.core.runs.report import pictures

            if not pictures():
                out.write(
                    f"report: no timeline picture, the HTML has no charts (no matplotlib: {INSTALL_HINT})\n"
                )
        # Last, whatever else was printed: a pipeline's log ends with why it exits as it does.
        chosen = forced_past(store.audit_entries(run_id=run.id))
        out.write(last_line(plan.name, run, forced=chosen) + "\n")
        return exit_status(run, forced=chosen)


def play_run(
    service: RunService,
    jobs: JobService,
    run: R.Run,
    sim: SimControl,
    term: Terminal,
    *,
    fail: str = "",
) -> R.Run:
    """Drive one run as far as the rehearsal goes: gates answered (by the roster, or at the
    prompt), the sim playing each manual step's `rehearsal:` hooks, long actions followed. The
    run as it stopped: ended, or paused where the rehearsal stops.

    `fail` plants a failure (`rehearse-fleet --fail CLUSTER:STEP`): when that step's gate opens,
    the roster rejects it with the reason on record, so the step fails and the run pauses on it,
    as it would on the day; the rehearsal leaves it paused."""
    played: set[tuple[str, int]] = set()
    while (
        run.state is R.RunState.ACTIVE
        or (term.auto_approve and _failed_action(run))
        or (term.interactive and _stopped_step(run))
    ):
        # No run ticker here: the window's end is told between steps, as the ticker would.
        run = _told_window_end(service, run)
        if run.state is R.RunState.PAUSED:
            # Said once the thread says why it paused: a step that failed on its driver's thread
            # is posted there right after its commit, and the rehearsal, seeing the run paused
            # first, printed "reviewed why … failed" above the failure.
            _await_thread(service, run)
            if fail and run.current is not None and run.current.step_id == fail:
                break  # the planted failure: nobody reviews it away
            run = (
                _skip_reviewed(service, run, term.out)
                if term.auto_approve
                else _offer_ways_on(service, run, term)
            )
            continue
        cur = run.current
        if cur is None:
            break
        step = run.plan.step(cur.step_id)
        if cur.step_id == fail and cur.state is R.StepState.AWAITING_APPROVAL:
            run = _plant_failure(service, run, cur, term.out)
            continue
        if cur.state is R.StepState.RUNNING and not step.manual:
            # A long action (a cluster job, a watch) runs on its driver; people answer what it asks.
            run = _follow_long(service, jobs, run, cur, term)
            continue
        if cur.state is R.StepState.RUNNING and step.manual and (cur.step_id, cur.epoch) not in played:
            played.add((cur.step_id, cur.epoch))
            failed = ""
            for hook in step.rehearsal:
                try:
                    ok, line = sim.play(hook)
                except UserError as exc:
                    raise UserError(
                        f"step {cur.step_id}: its rehearsal hook {hook.name}: {exc.user_message}"
                    ) from None
                term.out.write(f"  ↳ {line}\n")
                failed = failed or ("" if ok else line)
            if failed and term.auto_approve:
                # The outside world failed: the done gate is answered "failure", as a person would.
                ref = R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch, decision="reject")
                who = next(p for r in step.done_gate.roles for p in run.roster.get(r, ()))
                run = service.click(ref, Actor(user_id=who, source="terminal"), reason=failed).run
                continue
        _await_gate_post(service, run, cur)
        run = _decide(service, run, cur, term)
    return run


def _told_window_end(service: RunService, run: R.Run) -> R.Run:
    """The run, after the thread was told its window ended if it just did (`tick` says it in a
    bot; a rehearsal has no timers): a plan that outlasts its window shows it here too."""
    if run.state not in (R.RunState.ACTIVE, R.RunState.PAUSED):
        return run
    told = service.tell_window_end(run)
    return told.run if told is not None else run


#: How long the rehearsal waits for an open gate's message to reach the thread before answering.
GATE_POST_WAIT = 30.0


def _await_gate_post(service: RunService, run: R.Run, cur: R.StepRun) -> None:
    """Answer a gate only once its message is in the thread, as a person answers what they see.
    A long action's driver opens the next gate and posts it on its own thread, after reading the
    gate's dry run: answered before, the transcript read "approved" above "ready to start"."""
    key = gate_key(cur)
    deadline = time.monotonic() + GATE_POST_WAIT
    while time.monotonic() < deadline:
        ref = service.store.messages(run.id, prefix=key).get(key)
        if ref is not None and ref.ts:
            return
        time.sleep(0.05)


def _await_thread(service: RunService, run: R.Run) -> None:
    """Return once every thread line the run's commits owe is posted (`event:` rows of its
    outbox, written with each commit), or after GATE_POST_WAIT."""
    deadline = time.monotonic() + GATE_POST_WAIT
    while time.monotonic() < deadline:
        # Polled: only the thread lines not posted yet are read each time.
        refs = service.store.messages(run.id, posted_lines=False, prefix="event:")
        if not any(not ref.ts for ref in refs.values()):
            return
        time.sleep(0.05)


def _plant_failure(service: RunService, run: R.Run, cur: R.StepRun, out: TextIO) -> R.Run:
    """The planted failure: someone of the step's gate rejects it, saying it was planted."""
    step = run.plan.step(cur.step_id)
    who = next(p for r in step.gate.roles for p in run.roster.get(r, ()))
    reason = f"rehearsal: planted failure of `{cur.step_id}` (--fail)"
    out.write(f"  ↳ {named(who, run.roster, service.directory)} rejects `{cur.step_id}`: {reason}\n")
    ref = R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch, decision="reject")
    return service.click(ref, Actor(user_id=who, source="terminal"), reason=reason).run


def write_report(store: Store, run_id: str, directory: Path, *, now: datetime) -> list[Path]:
    """The run's report as `run-RUN.png`, `.html` and `.md` in `directory`; the paths, picture first
    (no picture without matplotlib, the optional `charts` extra)."""
    from bot.core.runs.report import build_report, pictures, render

    report = build_report(store, run_id, now=now)
    # Read later beside real runs' reports: it says it was a rehearsal, on the sim's clock.
    report = replace(
        report, cluster=f"{report.cluster} (a rehearsal on the simulated cluster; times are the sim's clock)"
    )
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in ("png", "html", "md") if pictures() else ("html", "md"):
        path = directory / f"run-{run_id}.{fmt}"
        path.write_bytes(render(report, fmt))
        paths.append(path)
    return paths


def exit_status(run: R.Run, *, forced: Sequence[str] = ()) -> int:
    """The terminal's statuses (bot.frontdoor.cli.EXIT_STATUSES): 0 completed with every step
    done (or skipped by people, never having failed); 3 completed with failed steps skipped, with
    steps that left something for people (a drain's skipped nodes) or past a safeguard people
    chose (`forced`), or paused (a finding, for a pipeline); 1 aborted."""
    if run.state is R.RunState.COMPLETED:
        end = ending(run)
        return 3 if end.skipped or end.left or forced else 0
    return 3 if run.state is R.RunState.PAUSED else 1


def last_line(plan_name: str, run: R.Run, *, forced: Sequence[str] = ()) -> str:
    """The rehearsal's last lines: how the run ended, in the words of its card — "completed with
    N failed steps skipped" (each named on the line before it), "paused at STEP" or "aborted"
    (the run's reason on the line before it); a run that completed past a safeguard people chose
    (`forced`: a cloud's refusal overridden, evidence waived) says so, each choice on a line."""
    head = f"rehearsal of {plan_name}: run {run.id}"
    if run.state is R.RunState.COMPLETED:
        end = ending(run)
        failed = "; ".join(
            f"{s.step_id} ({s.failure[:120]}{'…' if len(s.failure) > 120 else ''})" for s in end.skipped
        )
        before = f"failed and skipped: {people(failed, run.roster)}\n" if failed else ""
        before += "".join(f"not all done: {step_id} ({clip(left, 200)})\n" for step_id, left in end.left)
        before += "".join(
            f"past a safeguard by people's choice: {people(clip(f, 300), run.roster)}\n" for f in forced
        )
        past = f", {len(forced)} past a safeguard by people's choice" if forced else ""
        return f"{before}{head} {end.honest}{past}"
    # The run's reason names people by id ("rejected by U0PRIMARY"): mentions, as on its card.
    why = f"why: {people(run.reason, run.roster)}\n" if run.reason else ""
    if run.state is R.RunState.PAUSED:
        at = f" at {run.current.step_id}" if run.current is not None else ""
        return f"{why}{head} paused{at}"
    return f"{why}{head} {run.state}"


#: How long a rehearsal waits for one long action before it gives up (real seconds).
LONG_ACTION_LIMIT = 900.0


def _follow_long(
    service: RunService,
    jobs: JobService,
    run: R.Run,
    cur: R.StepRun,
    term: Terminal,
) -> R.Run:
    """Wait while a step's long action runs; answer the questions its job asks (the roster does
    with --auto-approve, the person at the prompt otherwise). The run as the step left it."""
    deadline = time.monotonic() + LONG_ACTION_LIMIT
    answered: set[str] = set()
    while time.monotonic() < deadline:
        run = _told_window_end(service, service.load(run.id))
        now = run.step_run(cur.step_id)
        if (
            now.state is not R.StepState.RUNNING
            or now.epoch != cur.epoch
            or run.state is not R.RunState.ACTIVE
        ):
            return run
        row = service.store.job_of_step(run.id, cur.step_id)
        choice = choice_of(row.choice) if row is not None and not row.decision else None
        if row is not None and choice is not None and choice.key not in answered:
            answered.add(choice.key)
            _answer(jobs, row.id, choice, run, term)
        time.sleep(0.2)
    raise UserError(f"step {cur.step_id} ran for more than {LONG_ACTION_LIMIT:g}s; the rehearsal stops")


def rehearsal_why(choice_key: str) -> str:
    """Why the rehearsal's roster answers a job's question as it does (the reason on record)."""
    if choice_key.startswith("api-block:"):
        return (
            "overrides AKS's deprecated-API block: the caller moves to the API's replacement after the window"
        )
    if choice_key.startswith("insights-force:"):
        return "forces past EKS's upgrade insights: the callers of the removed APIs move after the window"
    return "deletes the pods a disruption budget holds, as the pipeline would"


def _answer(
    jobs: JobService,
    job_id: int,
    choice: Choice,
    run: R.Run,
    term: Terminal,
) -> None:
    def holder(option: ChoiceOption) -> str:
        # A confirmation is a second person's: never the one who asked (`not_by`).
        return next(
            (p for role in option.roles for p in run.roster.get(role, ()) if p not in option.not_by), ""
        )

    if term.auto_approve:
        # As the EKS pipeline forces a drain after its timeout, the coordinator deletes what the
        # budget holds, with the reason on record; any other question gets its first answer.
        # (An EKS node group whose update failed on a budget is updated again with force, likewise.)
        # Whose hand-made changes an add-on loses is not the roster's to guess: a conflict stops.
        # AKS's deprecated-API block is overridden (asked, then confirmed by a second person), as
        # the team does once the caller's migration is scheduled.
        wanted = ("stop",) if choice.key.startswith("conflict:") else ("delete", "force", "override")
        option = next((o for o in choice.options if o.id in wanted), choice.options[0])
        reason = (
            f"rehearsal: {mention(holder(option))} {rehearsal_why(choice.key)}" if option.needs_reason else ""
        )
        term.out.write(
            f"  ↳ {named(holder(option), run.roster, jobs.directory)} answers job {job_id}: {option.label}\n"
        )
        jobs.decide(job_id, choice_key=choice.key, option=option.id, user_id=holder(option), reason=reason)
        return
    options = "/".join(o.id for o in choice.options)
    while True:
        answer = term.ask(
            f"job {job_id} asks: {choice.question} [{options}] (then a reason if it needs one): "
        ).strip()
        word, _, reason = answer.partition(" ")
        picked = next((o for o in choice.options if o.id == word), None)
        if picked is None:
            term.out.write(f"  · answer one of {options}\n")
            continue
        if picked.needs_reason and not reason.strip():
            # As the answer's modal does in Slack: an answer that needs a reason asks for it.
            reason = term.ask("  why? (it goes into the thread and the audit log): ")
            if not reason.strip():
                term.out.write(f"  · “{picked.label}” needs a reason: {picked.id} REASON\n")
                continue
        try:
            jobs.decide(
                job_id, choice_key=choice.key, option=picked.id, user_id=holder(picked), reason=reason
            )
            return
        except UserError as exc:
            term.out.write(f"  · {exc.user_message}\n")


def _failed_action(run: R.Run) -> bool:
    """The run paused because the bot's action of its current step failed (a check found blockers)."""
    cur = run.current
    return (
        run.state is R.RunState.PAUSED
        and cur is not None
        and cur.state is R.StepState.FAILED
        and bool(run.plan.step(cur.step_id).actions)
    )


def _stopped_step(run: R.Run) -> bool:
    """The run paused at a step that failed or was interrupted: people decide how it goes on."""
    cur = run.current
    return (
        run.state is R.RunState.PAUSED
        and cur is not None
        and cur.state in (R.StepState.FAILED, R.StepState.INTERRUPTED)
    )


def _offer_ways_on(service: RunService, run: R.Run, term: Terminal) -> R.Run:
    """At a failed or interrupted step, ask what the roster would decide in Slack: skip it (with
    a reason, on record), resume (a fresh gate: nothing re-runs until it is approved), or abort.
    Each is done as someone of the step's gate, through the same transitions as the commands."""
    cur = run.current
    assert cur is not None
    step = run.plan.step(cur.step_id)
    who = next(p for r in step.gate.roles for p in run.roster.get(r, ()))
    actor = Actor(user_id=who, source="terminal")
    term.out.write(framed(_card_text(service, run)))
    prompt = (
        f"{cur.step_id} {cur.state} and the run is paused: 'skip REASON' (as {named(who, run.roster, service.directory)}, "
        "and whoever else its gate needs), "
        "'resume' (its gate opens again), or 'abort': "
    )
    while True:
        word, _, reason = term.ask(prompt).strip().partition(" ")
        reason = reason.strip()
        if word in ("abort", "resume") or (word == "skip" and reason):
            break
        if word == "skip":
            term.out.write("  · say why: skip REASON (it goes on the card and into the audit log)\n")
        else:
            term.out.write("  · answer 'skip REASON', 'resume' or 'abort'\n")
    now = service.clock
    if word == "abort":
        why = reason or "rehearsal stopped"
        return service.apply(run.id, lambda r: R.abort(r, by=who, reason=why, now=now()), actor).run
    if word == "resume":
        why = reason or f"rehearsal: {mention(who)} resumes `{cur.step_id}`"
        return service.apply(run.id, lambda r: R.resume(r, by=who, reason=why, now=now()), actor).run
    return _skip_as_the_gate_counts(service, run, reason, term.out, first=who)


def _skip_reviewed(service: RunService, run: R.Run, out: TextIO) -> R.Run:
    """With --auto-approve, the roster reads a failed action's result and moves on, as a team that
    reviewed the findings would: the step's gate's people vote to skip it (two for a four-eyes
    gate, as `/upgrade skip` and the paused card's Skip… count them), each reason on record; then
    resume. Without --auto-approve the rehearsal stops there, as the run does."""
    cur = run.current
    assert cur is not None
    step = run.plan.step(cur.step_id)
    who = next(p for r in step.gate.roles for p in run.roster.get(r, ()))
    return _skip_as_the_gate_counts(service, run, "", out, first=who)


def _skip_as_the_gate_counts(
    service: RunService, run: R.Run, reason: str, out: TextIO, *, first: str
) -> R.Run:
    """Votes to skip the stopped step, `first` then the next people its gate needs, until the gate
    counts them enough (as in Slack: four eyes stay four eyes); then the run resumes past it.
    `reason` "" (--auto-approve): each voter's reason is the roster's review of the failure."""
    cur = run.current
    assert cur is not None
    step = run.plan.step(cur.step_id)
    people = list(dict.fromkeys([first, *(p for r in step.gate.roles for p in run.roster.get(r, ()))]))

    def vote(who: str, why: str) -> Callable[[R.Run], R.Outcome]:
        return lambda r: R.skip_step(
            r, step_id=cur.step_id, user_id=who, directory=service.directory, reason=why, now=service.clock()
        )

    for n, person in enumerate(people):
        why = reason or f"rehearsal: {mention(person)} reviewed why `{cur.step_id}` failed and skips it"
        more = " (a second vote: the step's gate needs it, as in Slack)" if n else ""
        said = (
            f"{named(person, run.roster, service.directory)} votes to skip {cur.step_id}" if reason else why
        )
        out.write(f"  ↳ {said}{more}\n")
        run = service.apply(run.id, vote(person, why), Actor(user_id=person, source="terminal")).run
        if run.step_run(cur.step_id).state is R.StepState.SKIPPED:
            break
    else:
        raise UserError(
            f"nobody in the roster can complete the vote to skip {cur.step_id}: its gate needs more people"
        )
    if run.state is R.RunState.PAUSED:
        run = service.apply(
            run.id,
            lambda r: R.resume(
                r, by=first, reason=reason or f"rehearsal: {mention(first)} resumes", now=service.clock()
            ),
            Actor(user_id=first, source="terminal"),
        ).run
    return run


#: What a gate's prompt offers of `/upgrade skip` (its help's words).
SKIP_OFFER = "'skip REASON' (people did it by hand, or it does not apply), "


def _skip_at_gate(service: RunService, run: R.Run, reason: str, term: Terminal) -> R.Run | None:
    """`skip REASON` at a gate: votes to skip the step, as its gate counts them (`/upgrade skip`),
    the reason on record; the run goes on to the next gate. None when it was not skipped (no
    reason, or a vote refused: said, and the gate is asked again)."""
    cur = run.current
    assert cur is not None
    if not reason:
        term.out.write("  · say why: skip REASON (it goes on the card and into the audit log)\n")
        return None
    step = run.plan.step(cur.step_id)
    who = next(p for r in step.gate.roles for p in run.roster.get(r, ()))
    try:
        return _skip_as_the_gate_counts(service, run, reason, term.out, first=who)
    except UserError as exc:
        term.out.write(f"  · {exc.user_message}\n")
        return None


def _decide(
    service: RunService,
    run: R.Run,
    cur: R.StepRun,
    term: Terminal,
) -> R.Run:
    gate = run.gate_for(cur)
    if gate is None:
        raise UserError(f"step {cur.step_id} is {cur.state} and waits for nothing the rehearsal can give")
    step = run.plan.step(cur.step_id)
    # Destructive steps ask for the step id typed in Slack; at the terminal the answer is that.
    confirmation = step.id if step.destructive else None
    people = [
        member
        for role in gate.roles
        for entry in run.roster.get(role, ())
        for member in (sorted(service.directory.group_members(entry)) if entry.startswith("S") else [entry])
    ]
    if not term.auto_approve:
        term.out.write(framed(_card_text(service, run)))
        # A step not started yet may be skipped, as `/upgrade skip STEP --reason …` does in Slack.
        skippable = cur.state is R.StepState.AWAITING_APPROVAL
        prompt = (
            f"{cur.step_id} ({run.phase(cur)}): approve as [{'/'.join(dict.fromkeys(people))}], "
            f"'reject REASON', {SKIP_OFFER if skippable else ''}or 'abort': "
        )
        # A person at a prompt mistypes or answers for the wrong role: the gate says why, as its
        # button would in Slack, and the same question is asked again. Only `abort` or the end of
        # input (EOFError, handled by the terminal front door) stops the rehearsal.
        while True:
            answer = term.ask(prompt).strip()
            if answer == "abort":
                stop = Actor(user_id="terminal", source="terminal")
                return service.apply(
                    run.id,
                    lambda r: R.abort(r, by="terminal", reason="rehearsal stopped", now=service.clock()),
                    stop,
                ).run
            if not answer:
                break  # nobody named: the roster answers this gate, as with --auto-approve
            word, _, reason = answer.partition(" ")
            if skippable and word == "skip":
                skipped = _skip_at_gate(service, run, reason.strip(), term)
                if skipped is None:
                    continue
                return skipped
            rejecting = word == "reject"
            if rejecting and not reason.strip():
                # As the Reject button's modal does: a rejection says why (thread and audit log).
                reason = term.ask("  why? (it goes into the thread and the audit log): ")
                if not reason.strip():
                    term.out.write("  · a rejection needs a reason: reject REASON\n")
                    continue
            who = people[0] if rejecting else answer
            decision = "reject" if rejecting else "approve"
            ref = R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch, decision=decision)
            outcome = service.click(
                ref,
                Actor(user_id=who, source="terminal"),
                confirmation=confirmation,
                reason=reason.strip() if rejecting else "",
            )
            if not outcome.accepted:
                term.out.write(f"  · {named(who, run.roster, service.directory)}: {outcome.message}\n")
                continue
            run = service.load(run.id)
            if run.step_run(cur.step_id).epoch != cur.epoch or run.state is not R.RunState.ACTIVE:
                return run
            # Counted, but the gate wants more (a quorum, a second role): ask for the next one.
    if run.phase(cur) == "done":
        # Four eyes: someone other than whoever started the step confirms it first.
        people.sort(key=lambda p: p == cur.started_by)
    ref = R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch)
    refusals: dict[str, str] = {}
    for person in dict.fromkeys(people):
        if not roles_of(person, run.roster, service.directory):
            continue
        out_ = service.click(ref, Actor(user_id=person, source="terminal"), confirmation=confirmation)
        if not out_.accepted:
            term.out.write(f"  · {named(person, run.roster, service.directory)}: {out_.message}\n")
            refusals[person] = out_.message
        run = service.load(run.id)
        now = run.step_run(cur.step_id)
        if now.epoch != cur.epoch or run.state is not R.RunState.ACTIVE:
            return run
    # The first refusal that is not four eyes' says why (a PR not read, say), not "nobody".
    why = next((m for m in refusals.values() if not m.startswith("four eyes")), "")
    step = run.plan.step(cur.step_id)
    # A done gate that requires a PR's state: the sim plays no GitHub's part, so say how to go on.
    past = (
        f" — a rehearsal plays no pull request: rehearse a copy of the plan without {cur.step_id}'s "
        "`pr.require` (its gate then waits for people only), as a real run would once the PR is merged"
        if step.pr is not None and step.pr.require and run.phase(cur) == "done"
        else ""
    )
    raise UserError(
        f"nobody in the roster can satisfy the gate of {cur.step_id} ({gate.describe()})"
        + (f": {why}" if why else "")
        + past
    )


def _card_text(service: RunService, run: R.Run) -> str:
    assert service.cards is not None
    return service.cards.renderer.render("runs/card", service.card_context(run)).text
