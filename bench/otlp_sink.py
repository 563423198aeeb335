"""An OTLP/HTTP trace sink for the bench: answers every export with 200 and counts the spans.

    python -m bench.otlp_sink        # prints "READY <port>"

It runs in a process of its own, so what receiving spans costs is not counted in the worker's CPU:
what the bench measures is what exporting them costs the worker.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

REPLY = ExportTraceServiceResponse().SerializeToString()


class _Sink(BaseHTTPRequestHandler):
    spans = 0
    names: Counter[str] = Counter()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                _Sink.spans += len(scope_spans.spans)
                _Sink.names.update(span.name for span in scope_spans.spans)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    # The harness stops it with SIGTERM: report what was received on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    print(f"READY {server.server_port}", flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        common = ", ".join(f"{name} {count}" for name, count in _Sink.names.most_common(12))
        print(f"spans received: {_Sink.spans} ({common})", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
