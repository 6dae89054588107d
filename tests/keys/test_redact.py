"""Secrets never reach a text tplab shows or writes: registered ones, variables named like
secrets, and key patterns nobody registered are masked; an error is one line."""

from __future__ import annotations

import asyncssh

from tplab.keys.redact import MASK, error_text, redact, register_secret


def test_registered_and_env_secrets_are_masked(monkeypatch):
    register_secret("s3cr3t-registered-value")
    monkeypatch.setenv("RUNPOD_API_KEY", "ENVKEY1234567890ABCDEF")
    out = redact("a s3cr3t-registered-value b ENVKEY1234567890ABCDEF c")
    assert out == f"a {MASK} b {MASK} c"


def test_patterns_catch_unregistered_secrets():
    pem = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    text = (f"key rpa_ABCDEFGH12345678 hdr Authorization: Bearer tok.en-1234567890 "
            f"url ?api_key=zzzzzzzzzzzz&x=1 json {{\"api_key\": \"yyyyyyyyyyyy\"}} {pem} end")
    out = redact(text)
    for secret in ("rpa_ABCDEFGH12345678", "tok.en-1234567890", "zzzzzzzzzzzz", "yyyyyyyyyyyy",
                   "PRIVATE KEY", pem.splitlines()[1]):
        assert secret not in out
    assert out.endswith("end") and "Bearer " + MASK in out


def test_error_text_is_one_line():
    assert error_text(ValueError("two\nlines  rpa_0123456789abcdef")) == f"two lines {MASK}"
    assert error_text(RuntimeError()) == "RuntimeError"
