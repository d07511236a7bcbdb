"""The operators' web console, served by ``tms-gateway`` under ``/console`` (docs/console.md).

Plain HTML, CSS and JavaScript files shipped in this package (``static/``: no CDN, no build step) draw
the screens; their data comes from JSON endpoints here that call the worker's ``MessagingClient``,
behind the gateway's tokens and rules (:mod:`.session`). :data:`ROUTES` is what the app mounts.
"""

from __future__ import annotations

from .api import ROUTES

__all__ = ["ROUTES"]
