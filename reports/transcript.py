"""The transcript of replayed scenarios (``takeover scenarios``, ``takeover.scenarios()``): each step with
what it returned, the state the queue's own snapshot shows and the spec's reason, in English or in the
original document's language; where a step differs, what was expected beside what came back.

Why in reports: the command prints it and the API keeps it as text (``ScenarioResult.transcript``); both
render the replay's results (takeover.scenario_replay), as the other reports render a CheckResult.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from takeover._internal import db
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
from takeover._internal.scenario.replay import load_spec
from takeover._internal.scenario.results import ReplayedScenario, StepResult, cut

# Narrower than this, the eight-column table wraps every cell; two lines per step read better.
TABLE_MIN_WIDTH = 120

# Every word the transcript prints, in both languages, so --lang zh has no English headings.
WORDS: dict[str, dict[str, str]] = {
    "en": {
        "queue": "queue: {queue} · ",
        "clock": "lease {lease} s, logical clock, {fresh} per scenario, {timeout:g} s per queue call",
        "fresh_sqlite": "a fresh SQLite file",
        "fresh_postgres": "a fresh PostgreSQL database",
        "fresh_redis": "an empty Redis database",
        "col_t": "t",
        "col_actor": "actor",
        "col_step": "step",
        "col_returns": "returns",
        "col_state": "state / generation",
        "col_why": "why",
        "col_check": "check",
        "pass": "ok",
        "fail": "FAIL",
        "skipped": "skip",
        "hung_at": "{id} stopped at step {n}: {error}",
        "not_run": "; steps {first}-{last} not run (the queue's state is unknown)",
        "not_run_one": "; step {first} not run (the queue's state is unknown)",
        "hung_open": "{id} did not start: {error}; none of its {n} steps ran",
        "hung_summary": "{n} scenario(s) stopped at a queue call that did not return within {timeout:g} s "
        "({ids}); {skipped} step(s) not run.",
        "expected": "expected",
        "got": "got",
        "step_n": "step {n}",
        "error": "error",
        "ledger": "ledger: {got} action(s) performed (expected {want})",
        "ledger_error": "ledger could not be read: {error}",
        "all_ok": "All {n} scenario(s) match the spec ({steps} steps) on {queue}.",
        "some_fail": "{bad} of {steps} steps differ from the spec ({ids}) on {queue}.",
        "mismatches": "Mismatches",
        "returns": "returns",
        "state": "state",
        "generation": "generation",
        "lease_until": "lease_until",
        "ledger_actions": "ledger actions",
        "task": "task handed out",
        "snapshot": "snapshot (task: state, generation, lease_until)",
    },
    "zh": {
        "queue": "队列：{queue} · ",
        "clock": "租约 {lease} 秒，逻辑时钟，每个场景{fresh}，每次队列调用限时 {timeout:g} 秒",
        "fresh_sqlite": "一个新的 SQLite 文件",
        "fresh_postgres": "一个新的 PostgreSQL 数据库",
        "fresh_redis": "一个空的 Redis 数据库",
        "col_t": "t",
        "col_actor": "角色",
        "col_step": "步骤",
        "col_returns": "返回",
        "col_state": "状态 / generation",
        "col_why": "说明",
        "col_check": "检查",
        "pass": "通过",
        "fail": "不符",
        "skipped": "跳过",
        "hung_at": "{id} 停在第 {n} 步：{error}",
        "not_run": "；第 {first}–{last} 步未运行（队列状态未知）",
        "not_run_one": "；第 {first} 步未运行（队列状态未知）",
        "hung_open": "{id} 未能开始：{error}；其 {n} 个步骤均未运行",
        "hung_summary": "{n} 个场景停在 {timeout:g} 秒内未返回的队列调用上（{ids}）；{skipped} 步未运行。",
        "expected": "期望",
        "got": "实际",
        "step_n": "第 {n} 步",
        "error": "异常",
        "ledger": "合成外部流水：动作次数 {got}（期望 {want}）",
        "ledger_error": "无法读取合成外部流水：{error}",
        "all_ok": "{n} 个场景全部符合规范（共 {steps} 步），队列 {queue}。",
        "some_fail": "{steps} 步中有 {bad} 步与规范不符（{ids}），队列 {queue}。",
        "mismatches": "不符之处",
        "returns": "返回",
        "state": "状态",
        "generation": "generation",
        "lease_until": "租约截止",
        "ledger_actions": "外部动作次数",
        "task": "领到的任务",
        "snapshot": "快照（任务：状态、generation、租约截止）",
    },
}



def fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return cut(str(value))


def _state(obs: dict[str, Any]) -> str:
    if obs.get("state") is None and obs.get("generation") is None:
        return "?"
    return f"{fmt(obs.get('state'))} / {fmt(obs.get('generation'))}"


def _cell(step: StepResult, keys: tuple[str, ...], text: str, expected_text: str, words: dict[str, str]) -> Text:
    """A cell that shows the observed value, and the expected one beside it when they differ."""
    if any(k in step.mismatches for k in keys):
        cell = Text(text, style="bold red")
        cell.append(f" ({words['expected']} {expected_text})", style="red")
        return cell
    return Text(text)


def _console() -> Console:
    # Piped output (CI logs, `| less`) gets no colour and a wide page, so rows wrap less.
    if sys.stdout.isatty():
        return Console(highlight=False)
    width = int(os.environ.get("COLUMNS", "0") or 0) or 140
    return Console(highlight=False, width=width, no_color=True)


def _cells(step: StepResult, words: dict[str, str]) -> tuple[Text, Text, Text]:
    """(check, returns, state) for one step, each showing the expected value when it differs."""
    spec, obs = step.spec, step.observed
    if step.skipped:
        return Text(words["skipped"], style="yellow"), Text("—", style="dim"), Text("—", style="dim")
    # A file's own step may expect only some of the values (spec.get: the others are not compared).
    no_answer = step.hung or (step.errors and spec.get("returns") is not None)
    returns = "—" if no_answer and obs.get("returns") is None else None
    returns_cell = _cell(step, ("returns",), returns or fmt(obs.get("returns")), fmt(spec.get("returns")), words)
    expected_state = f"{spec.get('state')} / {spec.get('generation')}"
    state_cell = _cell(step, ("state", "generation"), _state(obs), expected_state, words)
    if "lease_until" in step.mismatches:
        state_cell.append(
            f" ({words['lease_until']} {fmt(obs.get('lease_until'))}, "
            f"{words['expected']} {fmt(spec.get('lease_until'))})",
            style="red",
        )
    if "ledger_actions" in spec:
        ledger = Text(f"  [{words['ledger_actions']} {fmt(obs.get('ledger_actions'))}]")
        if "ledger_actions" in step.mismatches:
            ledger.stylize("bold red")
            ledger.append(f" ({words['expected']} {fmt(spec['ledger_actions'])})", style="red")
        state_cell.append_text(ledger)
    check = Text(words["pass"], style="green") if step.ok else Text(words["fail"], style="bold red")
    return check, returns_cell, state_cell


def _table(result: ReplayedScenario, words: dict[str, str], lang: str) -> Table:
    """The spec's own table layout, for terminals wide enough to hold it."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    # The verdict comes first so a failing row is visible at the left edge.
    table.add_column(words["col_check"], no_wrap=True, min_width=4)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(words["col_t"], justify="right", no_wrap=True)
    table.add_column(words["col_actor"], no_wrap=True)
    table.add_column(words["col_step"], max_width=34)
    table.add_column(words["col_returns"], max_width=30)
    table.add_column(words["col_state"], max_width=44)
    table.add_column(words["col_why"], ratio=1, overflow="fold")
    for step in result.steps:
        spec = step.spec
        check, returns_cell, state_cell = _cells(step, words)
        table.add_row(
            check,
            str(step.index),
            fmt(spec["t"]),
            spec["actor"] or "–",
            spec["label"][lang],
            returns_cell,
            state_cell,
            spec["why"][lang],
            style=None if step.ok else "dim" if step.skipped else "red",
        )
    return table


def _lines(result: ReplayedScenario, words: dict[str, str], lang: str) -> list[RenderableType]:
    """Two lines per step, for narrow terminals where eight columns would wrap into noise."""
    out: list[RenderableType] = []
    for step in result.steps:
        spec = step.spec
        check, returns_cell, state_cell = _cells(step, words)
        label, actor = spec["label"][lang], spec["actor"]
        who = f"{actor} " if actor and not label.startswith(f"{actor} ") else ""
        line = Text(check.plain + " " * max(1, 5 - cell_len(check.plain)), style=check.style)
        line.append(f"{step.index}. t={fmt(spec['t'])} {who}{label} → ")
        line.append_text(returns_cell)
        line.append(" · ")
        line.append_text(state_cell)
        out.append(line)
        out.append(Padding(Text(spec["why"][lang], style="dim"), (0, 0, 0, 8), expand=False))
    return out


def _describe(step: StepResult, result: ReplayedScenario, words: dict[str, str], lang: str, sep: str) -> str:
    spec, obs = step.spec, step.observed
    parts = [
        f"{words[k]}: {words['expected']} {fmt(spec.get(k))}, {words['got']} {fmt(obs.get(k))}"
        for k in step.mismatches
    ]
    parts += [f"{words['error']}: {cut(e)}" for e in step.errors]
    where = f"{result.id} {words['step_n'].format(n=step.index)} (t={fmt(spec['t'])}"
    where += f" {spec['actor']}" if spec["actor"] else ""
    where += f" {spec['label'][lang]})"
    return f"  ✗ {where}: " + sep.join(parts)


def _hang_line(result: ReplayedScenario, words: dict[str, str]) -> str:
    """Where a scenario stopped, and which of its steps were therefore not run."""
    hung = result.hung
    assert hung is not None
    if hung.step is None:
        return words["hung_open"].format(id=result.id, error=hung.error, n=len(result.steps))
    line = words["hung_at"].format(id=result.id, n=hung.step, error=hung.error)
    skipped = result.skipped_steps()
    if skipped:
        first, last = skipped[0].index, skipped[-1].index
        line += words["not_run" if first != last else "not_run_one"].format(first=first, last=last)
    return line


def header_line(words: dict[str, str], queue: str, lease: str, step_timeout: float, db_kind: str) -> str:
    """The line under the title: the queue, the lease, the clock, the database each scenario gets (the
    kind being served: a user on --db postgres is not told of a SQLite file), the per-call deadline."""
    fresh = words[f"fresh_{db_kind}" if db_kind in (db.POSTGRES, db.REDIS) else "fresh_sqlite"]
    return words["queue"].format(queue=queue) + words["clock"].format(lease=lease, fresh=fresh, timeout=step_timeout)


def print_transcript(
    results: list[ReplayedScenario],
    queue: str,
    lang: str,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
    doc: dict[str, Any] | None = None,
) -> None:
    words = WORDS[lang]
    spec = doc if doc is not None else load_spec()
    console = _console()
    sep = "；" if lang == "zh" else "; "
    console.print(Text(spec["title"][lang], style="bold"))
    leases = sorted({float(r.spec.get("lease_seconds", spec["lease_seconds"])) for r in results}) or [
        float(spec["lease_seconds"])]
    lease = f"{leases[0]:g}" if len(leases) == 1 else f"{leases[0]:g}-{leases[-1]:g}"
    console.print(header_line(words, queue, lease, step_timeout, db.current().kind))
    for result in results:
        console.print()
        console.print(Text(f"{result.id} — {result.spec['heading'][lang]}", style="bold"))
        if console.width >= TABLE_MIN_WIDTH:
            console.print(_table(result, words, lang))
        else:
            for line in _lines(result, words, lang):
                console.print(line)
        if result.hung is not None:
            console.print(Text("  " + _hang_line(result, words), style="bold red"), soft_wrap=True)
        elif "final_ledger_actions" in result.spec:
            if result.ledger_error:
                line = words["ledger_error"].format(error=result.ledger_error)
            else:
                line = words["ledger"].format(got=result.final_ledger_actions, want=result.spec["final_ledger_actions"])
            console.print(Text("  " + line, style="" if result.ledger_ok else "bold red"))
    steps = sum(len(r.steps) for r in results)
    failed = [(r, s) for r in results for s in r.failed_steps()]
    hung = [r for r in results if r.hung is not None]
    console.print()
    if all(r.ok for r in results):
        console.print(Text(words["all_ok"].format(n=len(results), steps=steps, queue=queue), style="bold green"))
        return
    console.print(Text(words["mismatches"], style="bold red"))
    for result in results:
        if result.hung is not None and result.hung.step is None:
            console.print(Text(f"  ✗ {_hang_line(result, words)}", style="red"), soft_wrap=True)
        for step in result.failed_steps():
            console.print(Text(_describe(step, result, words, lang, sep), style="red"), soft_wrap=True)
    ids = ", ".join(r.id for r in results if not r.ok)
    if failed or not hung:
        console.print(
            Text(words["some_fail"].format(bad=len(failed), steps=steps, ids=ids, queue=queue), style="bold red")
        )
    if hung:
        skipped = sum(len(r.skipped_steps()) for r in hung)
        line = words["hung_summary"].format(
            n=len(hung), timeout=step_timeout, ids=", ".join(r.id for r in hung), skipped=skipped
        )
        console.print(Text(line, style="bold red"), soft_wrap=True)
