"""Words from outside, made fit for one sentence: an HTML page reduced to its text, a bound
that never cuts a word.

Why one place: a provider's error page (a proxy's 500, a retired API's 404) and any long answer
end up inside a sentence tplab says to its user; raw HTML there is noise, and a reason cut at a
fixed character count ends mid-word. The client's error sentences (``keys.redact.one_line``),
the clouds' error details and the end's report all pass their outside words through here.
Standard library only.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: what ends a clipped text
ELLIPSIS = "…"
_TAG = re.compile(r"<\s*(!doctype|html|head|body|title|div|p|h\d|pre|center|hr|br|span|a)\b",
                  re.I)
_SKIP = ("script", "style", "head")


class _Words(HTMLParser):
    """The text of a page: its title first, then what its body says, tags and scripts left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.body: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP or tag == "title":
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if "title" in self._open:
            self.title.append(data)
        elif not any(t in _SKIP for t in self._open):
            self.body.append(data)


def looks_like_html(text: str) -> bool:
    return bool(_TAG.search(text[:2000]))


def plain_words(text: str) -> str:
    """``text`` on one line; an HTML page becomes its title and its words (no tags, no
    scripts), a title its body repeats said once."""
    if looks_like_html(text):
        parser = _Words()
        try:
            parser.feed(text)
            parser.close()
        except Exception:  # noqa: BLE001 - a page that does not parse: its tags dropped
            return " ".join(re.sub(r"<[^>]*>", " ", text).split())
        title = " ".join(" ".join(parser.title).split())
        body = " ".join(" ".join(parser.body).split())
        if title and body.startswith(title):
            body = body[len(title):].strip(" .:-")
        text = f"{title}: {body}" if title and body else title or body
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, cut at a word's end and marked ``…`` when cut."""
    if len(text) <= limit:
        return text
    room = max(1, limit - len(ELLIPSIS))
    cut = text[:room + 1]
    space = cut.rfind(" ")
    # at a word boundary not too far back; one very long word (a URL, a hash) is cut
    cut = cut[:space] if space >= room // 2 else cut[:room]
    return cut.rstrip(" ,;:-") + ELLIPSIS


def outside_words(text: str, limit: int = 300) -> str:
    """What an outside answer says, as words for a sentence: plain, bounded, never mid-word."""
    return clip(plain_words(text), limit)
