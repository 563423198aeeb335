"""A worker in its own network namespace, behind a router namespace that can blackhole its traffic.

    worker ns (10.R.1.2) --veth-- router ns (10.R.1.1 | 10.R.0.2) --veth-- host (10.R.0.1, 10.R.0.3)

The Temporal server, the model server and the forwarders (``netproxy``) stay in the host namespace;
the worker reaches the server's side at ``host_ip`` and the model's at ``model_ip``, through the
router, so a fault on the path behaves as on a real network: ``blackhole()`` makes the router drop
every packet between the worker and ``host_ip``, both ways (TCP retransmits, backing off, until
``restore()``), while the model's path stays up; ``link_down()`` takes the worker's interface down
(both paths; its routes go and sends fail at once) until ``link_up()``. Requires root and ``ip``; every name and address is this
topology's own (a random ``R`` not in use), and ``close()`` removes them all.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=10)


class Topology:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.worker_ns = f"acw{tag}"
        self.router_ns = f"acr{tag}"
        self._host_if, self._router_host_if = f"h{tag}", f"rh{tag}"
        self._router_worker_if, self._worker_if = f"rw{tag}", f"w{tag}"
        used = _ip("-4", "addr").stdout
        for _ in range(100):
            octet = random.randint(100, 250)
            if f" 10.{octet}." not in used:
                break
        else:
            raise RuntimeError("no free 10.x.0.0/16 for the test network")
        self.host_ip = f"10.{octet}.0.1"
        self.router_host_ip = f"10.{octet}.0.2"
        self.model_ip = f"10.{octet}.0.3"
        self._table = str(100 + octet)
        self.router_worker_ip = f"10.{octet}.1.1"
        self.worker_ip = f"10.{octet}.1.2"
        self._created: list[str] = []
        self._blackholed = False

    def open(self) -> Topology:
        try:
            for ns in (self.worker_ns, self.router_ns):
                _ip("netns", "add", ns)
                self._created.append(ns)
                _ip("link", "set", "lo", "up", netns=ns)
            _ip("link", "add", self._host_if, "type", "veth", "peer", "name", self._router_host_if)
            self._created.append(self._host_if)
            _ip("link", "set", self._router_host_if, "netns", self.router_ns)
            _ip("link", "add", self._worker_if, "type", "veth", "peer", "name", self._router_worker_if)
            self._created.append(self._worker_if)
            _ip("link", "set", self._worker_if, "netns", self.worker_ns)
            _ip("link", "set", self._router_worker_if, "netns", self.router_ns)
            _ip("addr", "add", f"{self.host_ip}/29", "dev", self._host_if)
            _ip("addr", "add", f"{self.model_ip}/29", "dev", self._host_if)
            _ip("link", "set", self._host_if, "up")
            _ip("addr", "add", f"{self.router_host_ip}/29", "dev", self._router_host_if, netns=self.router_ns)
            _ip(
                "addr",
                "add",
                f"{self.router_worker_ip}/30",
                "dev",
                self._router_worker_if,
                netns=self.router_ns,
            )
            _ip("link", "set", self._router_host_if, "up", netns=self.router_ns)
            _ip("link", "set", self._router_worker_if, "up", netns=self.router_ns)
            _ip("addr", "add", f"{self.worker_ip}/30", "dev", self._worker_if, netns=self.worker_ns)
            _ip("link", "set", self._worker_if, "up", netns=self.worker_ns)
            _ip("route", "add", "default", "via", self.router_worker_ip, netns=self.worker_ns)
            _ip("route", "add", f"{self.worker_ip}/32", "via", self.router_host_ip)
            # Replies from the server's side are looked up in a table of their own: a blackhole there
            # cuts that path alone.
            _ip("rule", "add", "from", f"{self.host_ip}/32", "table", self._table, netns=self.router_ns)
            _ip(
                "route",
                "add",
                self.worker_ip,
                "dev",
                self._router_worker_if,
                "table",
                self._table,
                netns=self.router_ns,
            )
            subprocess.run(
                ["ip", "netns", "exec", self.router_ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
                check=True,
                timeout=10,
            )
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> Topology:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the worker's namespace (the process keeps the pid ``ip`` execs)."""
        return ["ip", "netns", "exec", self.worker_ns, *argv]

    def blackhole(self) -> None:
        """The router drops every packet between the worker and ``host_ip``, both ways."""
        if not self._blackholed:
            _ip("route", "add", "blackhole", f"{self.host_ip}/32", netns=self.router_ns)
            _ip("route", "replace", "blackhole", self.worker_ip, "table", self._table, netns=self.router_ns)
            self._blackholed = True

    def restore(self) -> None:
        if self._blackholed:
            _ip("route", "del", "blackhole", f"{self.host_ip}/32", netns=self.router_ns, check=False)
            _ip(
                "route",
                "replace",
                self.worker_ip,
                "dev",
                self._router_worker_if,
                "table",
                self._table,
                netns=self.router_ns,
            )
            self._blackholed = False

    def link_down(self) -> None:
        _ip("link", "set", self._worker_if, "down", netns=self.worker_ns)

    def link_up(self) -> None:
        _ip("link", "set", self._worker_if, "up", netns=self.worker_ns)
        _ip("route", "replace", "default", "via", self.router_worker_ip, netns=self.worker_ns)

    def close(self) -> None:
        _ip("route", "del", f"{self.worker_ip}/32", check=False)
        for name in reversed(self._created):
            if name in (self.worker_ns, self.router_ns):
                subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True, timeout=10)
            else:
                _ip("link", "del", name, check=False)
        self._created.clear()
