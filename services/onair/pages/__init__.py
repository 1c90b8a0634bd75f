"""The on-air stage's two pages: the overlay viewers see (an OBS browser source) and the operator's console.

Both are served by the stage's HTTP server (:mod:`kotae.services.onair.web`), so
only the speaking process serves them and whatever is connected follows the one
voice. :class:`Pages` holds what they read; :func:`add_pages` is the route adder
the server runs (``web.ROUTES``). The routes are listed in ``README.md`` beside
this file.
"""

from __future__ import annotations

from kotae.services.onair.pages.access import ConsoleAccessError, ConsoleToken, check_binding, console_token, new_token
from kotae.services.onair.pages.context import Pages
from kotae.services.onair.pages.routes import add_pages

__all__ = [
    "ConsoleAccessError",
    "ConsoleToken",
    "Pages",
    "add_pages",
    "check_binding",
    "console_token",
    "new_token",
]
