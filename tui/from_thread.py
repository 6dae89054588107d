"""Handing a worker thread's result to the UI without waiting for the UI.

Why: ``App.call_from_thread`` blocks the worker until the event loop has run the callback. A
worker that finishes while the app shuts down (or while the loop is stuck) then waits on a loop
that will not run it, and the shutdown waits for that worker in turn: Textual's thread workers
run in the loop's default executor, which asyncio joins before the process may end. So results
are posted instead: ``post_from_thread`` queues the callback as a message of ``node``
(thread-safe) and returns at once; when the node or the app is closing the result is dropped,
which is all a result nobody will see deserves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message_pump import MessagePump


def post_from_thread(node: MessagePump, callback: Callable[..., Any], *args: Any) -> bool:
    """Run ``callback(*args)`` on the UI loop, as a message of ``node``; never waits. False
    when it was dropped (the app is not running, the node is closing)."""
    try:
        if not node.app.is_running:
            return False
        return node.call_later(callback, *args)
    except RuntimeError:  # the loop is closed, or no app: nobody is there to take it
        return False
