"""Run an agentcore worker: ``python worker.py``.

A launcher only; the worker is ``agentcore.worker`` (``create_worker``, ``AgentWorker``), which is also
what ``agentcore worker`` runs.
"""

import asyncio

from agentcore.worker import main

if __name__ == "__main__":
    asyncio.run(main())
