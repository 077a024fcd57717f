"""The progress line counts what a person watching a run can trust: never "done 361/349"."""

from __future__ import annotations

import io

from takeover._internal.run.progress import Progress, ProgressDisplay


def _plain(p: Progress) -> str:
    out = io.StringIO()
    with ProgressDisplay(out, live=False) as display:
        display.update(p)
    return out.getvalue()


def test_tasks_and_accepted_finishes_are_told_apart() -> None:
    line = _plain(Progress(stage="drain", registered=349, terminal=340, done=338, workers=4))
    assert "tasks: 349 registered, 340 terminal; finishes accepted 338," in line
    assert "twice" not in line


def test_more_accepted_finishes_than_tasks_is_said_in_words() -> None:
    line = _plain(Progress(stage="drain", registered=349, terminal=349, done=361, workers=4))
    assert "finishes accepted 361 (more than the tasks: a task was finished twice)" in line


def test_the_faulted_phase_has_no_terminal_count_yet() -> None:
    line = _plain(Progress(stage="faults", duration=20, registered=150, done=3, workers=4))
    assert "tasks: 150 registered; finishes accepted 3," in line
