"""Keeping secrets (API keys, private keys) out of every text tplab shows or writes: ``redact``.

Why a room of its own: every error, log line, event, manifest and instance record passes
through it, on every side of the client, and the rule it holds (registered secrets, variables
named like secrets, key patterns) is one. The pod's guard and watchdog keep their own, as only
the job's packages travel. Client side; standard library only.
"""
