"""``python -m agentcore.testing.loopback``: serve the echo assistant (see ``server.main``)."""

from .server import main

main()
