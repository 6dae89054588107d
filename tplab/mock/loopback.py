"""What every mock cloud's HTTP server does the same way: serve an aiohttp app on 127.0.0.1, run a
background watch (balance/credit), and on stop end every pod, then remove the sandboxes.

Why shared: the RunPod mock (runpod_mock/server.py) and the Vast mock (vast_mock/server.py) start, report and stop
alike, so a parent (cli.py, handle.py) drives either, or both in one process, the same way. The
page a proxy answers when the service behind it fails (``error_page``) is the same for both.
A subclass gives ``provider``, ``build_app()`` and ``watch()``; its ``state`` has ``api_key``,
``api_url``, ``state_dir``, ``keep_sandboxes`` and ``async shutdown()``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from aiohttp import web

LOOPBACK = "127.0.0.1"


class LoopbackServer:
    """A mock cloud in this process: ``await start()``, use ``api_url``, ``await stop()``."""

    provider = ""
    state: Any

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[Any] | None = None

    def build_app(self) -> web.Application:
        raise NotImplementedError

    async def watch(self) -> None:
        """Runs for the server's life (cancelled at stop)."""

    @property
    def api_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def start(self) -> None:
        self._runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []  # aiohttp keeps them here
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self.state.api_url = self.api_url
        self._watch = asyncio.get_running_loop().create_task(self.watch())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self.state.shutdown()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if not self.state.keep_sandboxes:
            import shutil

            await asyncio.to_thread(shutil.rmtree, self.state.state_dir, True)

    def ready_info(self) -> dict[str, Any]:
        """What the ready line says of this cloud (parents read it: see handle.py and cli.py)."""
        return {"provider": self.provider, "api_url": self.api_url,
                "api_key": self.state.api_key, "state_dir": str(self.state.state_dir),
                "pid": os.getpid()}

    def ready_line(self) -> str:
        """The one JSON line printed when ready."""
        return json.dumps(self.ready_info())


#: what a proxy in front of an API answers when the service behind it fails: an HTML page, not
#: the API's JSON (the ``error_page`` switch of both mock clouds answers their 500s with it)
ERROR_PAGE = ("<!DOCTYPE html>\n<html>\n<head><title>500 Internal Server Error</title>\n"
              "<style>body{font-family:sans-serif}</style></head>\n<body>\n<center><h1>500 "
              "Internal Server Error</h1></center>\n<hr><center>cloudflare</center>\n"
              "<script>window.__cf = {ray: '8d2f0c1e7b3a9d11'};</script>\n</body>\n</html>\n")


def error_page(status: int = 500) -> web.Response:
    """The proxy's page (``ERROR_PAGE``) as an aiohttp answer."""
    return web.Response(status=status, text=ERROR_PAGE, content_type="text/html")
