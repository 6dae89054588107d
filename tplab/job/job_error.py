"""The job's one kind of failure a user can act on, in a module that needs no torch.

Why apart from ``runtime`` (which re-exports it): the input check
(``input_check``) raises it too, and runs in a subprocess of the client before any pod exists,
where importing torch would cost seconds for a sentence about a prompts file.

Pod-side: the standard library only.
"""

from __future__ import annotations


class JobError(RuntimeError):
    """A failure the user can act on; its message is one clear sentence."""
