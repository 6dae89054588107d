"""The Labs screen: every lab that ran (TPLAB_HOME/labs, its mock twin, and the folders given on
the command line), newest first, with the selected lab's manifest beside the list.

Enter opens the lab in the dashboard (its stream played at once into the same panels: budget,
instance, timings, curve, log); ``r`` replays it at ×10; escape goes back. The folders are read
in a worker thread, so a long list never holds the screen.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tplab.viewmodel.past_labs import PastLab, default_roots, find_labs
from tui.screens.past_lab_detail import COLUMNS, detail, row_cells
from tui.from_thread import post_from_thread

OPEN, REPLAY = "open", "replay"


class LabsScreen(Screen[tuple[str, Path] | None]):
    DEFAULT_CSS = """
    LabsScreen #labs-title { height: 1; padding: 0 1; background: $boost; }
    LabsScreen #labs-body { height: 1fr; }
    LabsScreen DataTable { width: 3fr; height: 1fr; }
    LabsScreen #labs-detail { width: 2fr; height: 1fr; border-left: solid $primary 60%;
                              padding: 0 1; }
    LabsScreen.-stacked #labs-body { layout: vertical; }
    LabsScreen.-stacked DataTable { width: 1fr; height: 1fr; }
    LabsScreen.-stacked #labs-detail { width: 1fr; height: 1fr; border-left: none;
                                       border-top: solid $primary 60%; }
    """
    BINDINGS = [Binding("escape,q", "back", "Back"),
                Binding("enter", "open", "Open in dashboard"),
                Binding("r", "replay", "Replay ×10"),
                Binding("g", "reload", "Reload")]

    def __init__(self, extra_dirs: list[Path] | None = None) -> None:
        super().__init__()
        self.extra_dirs = list(extra_dirs or [])
        self.labs: dict[str, PastLab] = {}

    def compose(self) -> ComposeResult:
        yield Static("Labs · reading the lab folders…", id="labs-title")
        with Horizontal(id="labs-body"):
            table: DataTable = DataTable(id="labs-table", cursor_type="row", zebra_stripes=True)
            table.add_columns(*COLUMNS)
            yield table
            with VerticalScroll(id="labs-detail"):
                yield Static("", id="labs-detail-text")
        yield Footer()

    def on_mount(self) -> None:
        self._load()

    def on_resize(self) -> None:
        self.set_class(self.size.width < 130, "-stacked")

    @work(thread=True, exclusive=True, group="labs-list")
    def _load(self) -> None:
        labs = find_labs(default_roots(), self.extra_dirs)
        post_from_thread(self, self._show, labs)

    def _show(self, labs: list[PastLab]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.labs = {}
        for lab in labs:
            key = str(lab.path)
            self.labs[key] = lab
            table.add_row(*row_cells(lab), key=key)
        n_mock = sum(1 for lab in labs if lab.mock)
        self.query_one("#labs-title", Static).update(
            f"[b]Labs[/b] · {len(labs)} found ({n_mock} mock) in TPLAB_HOME/labs, "
            f"TPLAB_HOME/mock/labs" + (" and the folders given" if self.extra_dirs else "")
            + " · enter: open · r: replay ×10 · esc: back")
        if labs:
            table.focus()
            self._detail(str(labs[0].path))
        else:
            self.query_one("#labs-detail-text", Static).update(
                "No lab has run yet: press esc, then s to start one.")

    def _selected(self) -> PastLab | None:
        table = self.query_one(DataTable)
        if not self.labs or table.cursor_row is None or table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        return self.labs.get(str(key))

    def _detail(self, key: str) -> None:
        lab = self.labs.get(key)
        if lab is not None:
            self.query_one("#labs-detail-text", Static).update(detail(lab))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self._detail(str(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_back(self) -> None:
        self.dismiss(None)

    def action_reload(self) -> None:
        self._load()

    def action_open(self) -> None:
        lab = self._selected()
        if lab is not None:
            self.dismiss((OPEN, lab.path))

    def action_replay(self) -> None:
        lab = self._selected()
        if lab is None:
            return
        if not lab.has_stream:
            self.notify(f"{lab.lab_id} has no stream.jsonl to replay.", severity="warning")
            return
        self.dismiss((REPLAY, lab.path))
