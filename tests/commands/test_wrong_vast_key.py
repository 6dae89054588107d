"""A wrong Vast key, as Vast answers it (404 ``auth_error``, not 401): `tplab check`, `tplab status`,
`tplab terminate ID` and a lab each end non-zero with one sentence about the key and where it was
found; none says gone, none calls a destroy done, and the instance is still there."""

from __future__ import annotations

from tests.e2e_fixtures import assert_key_unwritten
from tests.mock.vast_helpers import create, destroy, show
from tplab.commands.main import main

WRONG = "0123456789abcdef" * 4


def _one_sentence_about_the_key(said: str) -> None:
    assert "Vast.ai refused the API key from VAST_API_KEY (HTTP 404: auth_error" in said, said
    assert "gone" not in said.lower() and "destroyed" not in said.lower(), said


def test_a_wrong_vast_key_is_one_sentence_about_the_key_everywhere(vast, tmp_path, monkeypatch,
                                                                   capsys):
    _, made = create(vast, "tplab-wrong-key", target_state="stopped")
    inst = str(made["new_contract"])
    monkeypatch.setenv("VAST_API_KEY", WRONG)
    where = ["--mock", "--api-url", vast.api_url, "--provider", "vast"]
    printed: list[str] = []
    try:
        assert main(["check", *where]) == 1
        out, err = capsys.readouterr()
        printed.append(out + err)
        key_line = next(line for line in out.splitlines() if "] key " in line)
        assert key_line.lstrip().startswith("[FAIL] key")
        _one_sentence_about_the_key(key_line)

        assert main(["status", *where]) == 1
        out, err = capsys.readouterr()
        printed.append(out + err)
        assert out == "" and err.count("\n") == 1 and err.startswith("tplab status: ")
        _one_sentence_about_the_key(err)

        assert main(["terminate", inst, *where]) == 1
        out, err = capsys.readouterr()
        printed.append(out + err)
        assert out == "" and err.count("\n") == 1 and err.startswith("tplab terminate: ")
        _one_sentence_about_the_key(err)
        assert show(vast, int(inst)) is not None            # nothing was destroyed

        creates = vast.calls().get("PUT /api/v0/asks/{id}", 0)
        code = main(["run", *where, "--yes", "--prompts", "2", "--new-tokens", "4",
                     "--no-sweep", "--out", str(tmp_path / "lab")])
        out, err = capsys.readouterr()
        printed.append(out + err)
        assert code == 1, (out, err)
        reason = [line for line in (out + err).splitlines() if "refused the API key" in line]
        assert reason, out + err
        _one_sentence_about_the_key(reason[-1])
        assert vast.calls().get("PUT /api/v0/asks/{id}", 0) == creates   # nothing rented
        # -- fault suite: "vast key refused" (FAILED, exit 1, nothing rented, no hold), and the
        # key in no file and nothing printed
        assert not list((tmp_path / "tplab-home").rglob("spend.jsonl")) or all(
            '"authorize"' not in p.read_text()
            for p in (tmp_path / "tplab-home").rglob("spend.jsonl"))
        assert_key_unwritten(WRONG, tmp_path, printed)
    finally:
        destroy(vast, int(inst))
