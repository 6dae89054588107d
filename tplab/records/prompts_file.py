"""The prompts file: UTF-8 text, one prompt a line, blank lines and ``#`` comments skipped.

Why in records: the client uploads the file and the job on the pod reads it, so both sides must
read it the same way. The client reads it before anything is rented (a file that is not UTF-8
text, or has too few prompts, is the user's to fix, not a pod's to find after a billed boot);
the job reads it again with the same words. Standard library only: it travels to the pod.
"""

from __future__ import annotations

from pathlib import Path


class PromptsFileError(ValueError):
    """A prompts file the job cannot use; the message is one sentence saying what to do."""


def decode_prompts(data: bytes, path: str) -> list[str]:
    """The prompts of a file's bytes (a UTF-8 byte-order mark is allowed)."""
    if b"\0" in data:
        raise PromptsFileError(f"the prompts file {path} is not a text file (it holds NUL "
                               "bytes); give UTF-8 text, one prompt a line.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PromptsFileError(
            f"the prompts file {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line "
            f"{line}); save it as UTF-8, one prompt a line.") from None
    return [ln.strip() for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def read_prompts(path: str | Path, count: int, flag: str = "--num-prompts") -> list[str]:
    """The first ``count`` prompts of the file at ``path``; ``PromptsFileError`` otherwise.
    ``flag`` names the count as the user typed it (the clients spell it ``--prompts``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PromptsFileError(f"cannot read the prompts file {path}: "
                               f"{exc.strerror or exc}.") from None
    prompts = decode_prompts(data, str(path))
    if count < 1:
        raise PromptsFileError(f"{flag} must be at least 1, got {count}.")
    if len(prompts) < count:
        raise PromptsFileError(f"{path} has {len(prompts)} prompts, fewer than {flag} {count}.")
    return prompts[:count]
