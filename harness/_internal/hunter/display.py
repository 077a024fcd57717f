"""The hunt's live status line on a terminal: the hunt's clock, the run under way and its faults so far."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from takeover._internal.run.progress import LiveDisplay
from takeover._internal.soak.display import clock

if TYPE_CHECKING:
    from takeover._internal.run.progress import Progress


class HuntDisplay(LiveDisplay):
    """One live status line on a terminal (the hunt's clock, the run under way and its faults so far);
    otherwise nothing but the line per run that :meth:`note` prints."""

    refresh_per_second = 2

    def __init__(self, stream: TextIO, budget: float, *, live: bool | None = None) -> None:
        super().__init__(stream, live=live)
        self.budget = budget
        self.row: dict[str, Any] = {}

    def start(self, row: dict[str, Any]) -> None:
        self.row = row

    def update(self, p: Progress, elapsed: float) -> None:
        if self._live is None:
            return
        from rich.text import Text  # plain text: "[hunt ...]" would read as markup

        r = self.row
        self._live.update(Text(f"hunt {clock(elapsed)}/{clock(self.budget)} | run {r.get('run')} seed {r.get('seed')} "
                               f"{r.get('mode')} | {p.stage} {p.elapsed:.1f} s | kills {p.kills} pauses {p.pauses} "
                               f"lost {p.lost_replies} slow {p.slow} | done {p.done}"))  # fmt: skip

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:  # the status line goes; the lines per run stay
            from rich.text import Text

            self._live.update(Text(""))
        super().__exit__(*exc)
