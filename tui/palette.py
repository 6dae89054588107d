"""Command palette entries (ctrl+p) for the lab's actions.

They run the same app actions as the keys and buttons, so the palette, the bindings and the
buttons cannot drift apart.
"""

from __future__ import annotations

from typing import Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider

#: (name, help, app action)
LAB_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("Start lab", "Start the lab with the options given on the command line (in a replay: "
     "play it again)", "start"),
    ("New lab", "After a replay: start a lab with the options given on the command line",
     "new_lab"),
    ("TERMINATE pod", "Terminate the pod now and verify it is gone (no confirmation)",
     "terminate"),
    ("Labs", "Every lab that ran: open one in the dashboard or replay it", "labs"),
    ("Help", "Keys and what every panel shows", "help"),
    ("Log filter", "Step the log's filter: all, lab, job, stderr, problems", "log_filter"),
    ("Save screenshot", "Save an SVG of the dashboard next to the lab's manifest (else in "
     "TPLAB_HOME/screenshots)", "screenshot"),
    ("Quit", "Quit; while a pod is alive: terminate, leave running, or cancel", "quit"),
)


class LabCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, str, str]]:
        yield from LAB_COMMANDS

    def _runner(self, action: str):
        async def run() -> None:
            await self.app.run_action(action)

        return run

    async def discover(self) -> Hits:
        for name, help_, action in self._commands():
            yield DiscoveryHit(name, self._runner(action), help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_, action in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), self._runner(action), help=help_)
