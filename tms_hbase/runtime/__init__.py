"""How the protocol code waits: on threads, or on an asyncio event loop through greenlets (``green``). The
bottom layer: it imports nothing else of the library, and everything that waits imports it."""
