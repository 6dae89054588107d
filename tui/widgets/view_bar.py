"""The view switch: one line naming the views a layout can show, the current one marked.

Each name is a link (a click switches), and keys 1–5 do the same from anywhere. The current
view is marked with ▸ and reverse video, so it reads without colour.
"""

from __future__ import annotations

from textual.widgets import Static

from tui.layout import VIEWS


def viewbar_markup(offered: tuple[str, ...], current: str, extra: str = "") -> str:
    """Textual markup for the switch (links run ``app.view``)."""
    parts = []
    for i, (view, name) in enumerate(VIEWS, 1):
        if view not in offered:
            continue
        if view == current:
            parts.append(f"[b]▸[reverse] {i} {name} [/reverse][/b]")
        else:
            parts.append(f" [@click=app.view('{view}')][u]{i} {name}[/u][/] ")
    keys = "/".join(str(i) for i, (v, _) in enumerate(VIEWS, 1) if v in offered)
    text = " ".join(parts) + f"  [dim]keys {keys}[/dim]"
    if extra:
        text += f"  [dim]{extra}[/dim]"
    return text


class ViewBar(Static):
    DEFAULT_CSS = """
    ViewBar { height: 1; width: 1fr; background: $boost; padding: 0 1; text-wrap: nowrap;
              text-overflow: ellipsis; }
    """

    _shown: str | None = None

    def show(self, offered: tuple[str, ...], current: str, extra: str = "") -> None:
        markup = viewbar_markup(offered, current, extra)
        if markup != self._shown:
            self._shown = markup
            self.update(markup)
