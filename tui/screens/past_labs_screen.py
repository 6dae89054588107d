"""The Labs screen: every lab that ran (TPLAB_HOME/labs, its mock twin, and the folders given on
the command line), newest first, with the selected lab's manifest beside the list.

Enter opens the lab in the dashboard (its stream played at once into the same panels: budget,
instance, timings, curve, log); ``r`` replays it at ×10; escape goes back. The folders are read
in a worker thread, so a long list never holds the screen. The table keeps the columns that fit
the screen whole (``columns_that_fit``): a narrow one drops the least needed, never cuts one.
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
from tui.screens.past_lab_detail import COLUMNS, columns_that_fit, detail, row_cells
from tui.from_thread import post_from_thread

OPEN, REPLAY = "open", "replay"


class LabsScreen(Screen[tuple[str, Path] | None]):
    DEFAULT_CSS = """
    LabsScreen #labs-title { height: auto; padding: 0 1; background: $boost; }
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
                Binding("g", "reload", "Reload"),
                # the dashboard's Start, New lab and Labs wait until this screen closes
                Binding("s,n,l", "stay", show=False)]

    def __init__(self, extra_dirs: list[Path] | None = None) -> None:
        super().__init__()
        self.extra_dirs = list(extra_dirs or [])
        self.labs: dict[str, PastLab] = {}
        self._order: list[PastLab] = []
        self._columns: tuple[int, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static("Labs · reading the lab folders…", id="labs-title")
        with Horizontal(id="labs-body"):
            yield DataTable(id="labs-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="labs-detail"):
                yield Static("", id="labs-detail-text")
        yield Footer()

    def on_mount(self) -> None:
        self._load()

    def on_resize(self) -> None:
        self.set_class(self.size.width < 130, "-stacked")
        if self._order:
            self._fill_table()

    def _table_width(self) -> int:
        """The table's width: the screen's when stacked, else its 3 of 5 parts."""
        width = self.size.width
        return width if self.has_class("-stacked") else width * 3 // 5

    @work(thread=True, exclusive=True, group="labs-list")
    def _load(self) -> None:
        labs = find_labs(default_roots(), self.extra_dirs)
        post_from_thread(self, self._show, labs)

    def _fill_table(self) -> None:
        """The rows, in the columns that fit; the table is rebuilt only when those change."""
        table = self.query_one(DataTable)
        rows = [row_cells(lab) for lab in self._order]
        columns = columns_that_fit(rows, self._table_width())
        if columns == self._columns and table.row_count == len(rows):
            return
        cursor = table.cursor_row
        table.clear(columns=True)
        self._columns = columns
        table.add_columns(*(COLUMNS[i] for i in columns))
        for lab, cells in zip(self._order, rows):
            table.add_row(*(cells[i] for i in columns), key=str(lab.path))
        if rows and cursor:
            table.move_cursor(row=min(cursor, len(rows) - 1))

    def _show(self, labs: list[PastLab]) -> None:
        self._order = list(labs)
        self.labs = {str(lab.path): lab for lab in labs}
        self._columns = ()
        self._fill_table()
        n_mock = sum(1 for lab in labs if lab.mock)
        self.query_one("#labs-title", Static).update(
            f"[b]Labs[/b] · {len(labs)} found ({n_mock} mock) in TPLAB_HOME/labs, "
            f"TPLAB_HOME/mock/labs" + (" and the folders given" if self.extra_dirs else "")
            + " · enter: open · r: replay ×10 · esc: back")
        if labs:
            self.query_one(DataTable).focus()
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

    def action_stay(self) -> None:
        """A dashboard key that has nothing to do here."""

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
