"""TERMINATE as the app runs it: the lab's own terminate while a lab runs, the leftover sweep
when none does.

A mixin of ``TplabApp``. TERMINATE never asks for confirmation, works in every state, and a
second press changes nothing. With a lab running it asks the lab to terminate its pod (the lab
terminates and verifies); with none running it looks for tplab pods left behind and terminates
them (in a worker: the provider is synchronous). In a replay there is no pod to end.
"""

from __future__ import annotations

import asyncio

from textual import work

from tui.messages import SweepProgress
from tui.terminate.bar import StartPressed, TerminatePressed


class TerminateControl:
    def on_terminate_pressed(self, _: TerminatePressed) -> None:
        self.action_terminate()

    def on_start_pressed(self, _: StartPressed) -> None:
        self.action_start()

    def action_terminate(self) -> None:
        if self.mode != "live" and (self.lab_active or self.sweep_factory is None):
            self.notify("This is a recording played back: there is no pod to terminate.",
                        title="REPLAY")
            return
        if self.lab_active:
            if self.state.note_terminate_requested() and self.lab is not None:
                self.lab.request_terminate("user")
            # a lab still being built picks the request up from the state (see _run_lab)
        elif self.state.terminate_status == "gone" and self.mode == "live":
            pass  # this lab's pod is verified gone: nothing left to do
        elif not self._sweeping:
            self._sweeping = True
            self._sweep_leftovers()
        self.redraw_controls()

    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def _sweep_leftovers(self) -> None:
        """TERMINATE with no lab running: find pods tplab left behind and terminate them."""
        post = self.post_message
        if self.sweep_factory is None:
            post(SweepProgress("no lab configured: no provider to ask for pods", finished=True,
                               ok=False))
            return
        post(SweepProgress("looking for tplab pods left running…"))
        try:
            lab = await asyncio.to_thread(self.sweep_factory)
            pods = list(await asyncio.to_thread(lab.find_leftover_pods))
            left: list[str] = []
            for pod in pods:  # one pod's failure never stops the others
                post(SweepProgress(f"terminating leftover pod {pod.id}… verifying gone…"))
                try:
                    proof = await lab.terminate_pod(pod.id)
                    gone, why = bool(getattr(proof, "gone", False)), "still shown alive"
                except Exception as exc:  # noqa: BLE001 - said, and the next pod still goes
                    gone, why = False, " ".join(str(exc).split()) or type(exc).__name__
                if not gone:
                    left.append(pod.id)
                self.state.note(f"leftover pod {pod.id} "
                                + ("terminated, verified gone" if gone else
                                   f"NOT verified gone ({why}): check the provider console and "
                                   f"press TERMINATE again"),
                                "info" if gone else "error")
            if left:
                post(SweepProgress(f"{len(left)} of {len(pods)} leftover pod(s) NOT verified gone "
                                   f"({', '.join(left)}): check the provider console",
                                   finished=True, ok=False))
            else:
                post(SweepProgress(f"{len(pods)} leftover pod(s) terminated ✓" if pods
                                   else "no tplab pod is running ✓", finished=True, ok=True))
        except Exception as exc:  # noqa: BLE001 - shown to the user
            post(SweepProgress(f"leftover check failed: {exc}", finished=True, ok=False))

    def on_sweep_progress(self, msg: SweepProgress) -> None:
        self._sweep = msg.text
        if msg.finished:
            self._sweeping = False
        self._sweep_done = msg.finished and msg.ok
        self.state.note(msg.text, "info" if msg.ok else "error")
        self.redraw_controls()
