"""What `vpub serve` lets in: the binding rule and per-client rate limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from ipaddress import ip_address

from ..errors import SpecError


def check_binding(host: str, token: str | None) -> None:
    """A server off loopback must require a token."""
    try:
        loopback = ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not token:
        raise SpecError(
            f"binding to {host} (not loopback) needs --token-file: every client must send the bearer token"
        )


class RateLimit:
    """A token bucket per client address: `rate` requests a second on average, up to
    `burst` at once; `rate` 0 turns the limit off. Decision: the limit is per server
    process (`--workers N` lets a client N times the rate), kept in memory and
    forgotten on restart; clients idle for a minute are dropped, so memory stays
    bounded by the clients of the last minute."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        if rate < 0 or burst < 1:
            raise SpecError(f"rate limit: rate must be >= 0 and burst >= 1, not {rate} and {burst}")
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, time)
        self._lock = threading.Lock()
        self._clock = clock  # seconds, never going back (a test's own clock)
        self._swept = clock()

    def wait(self, client: str) -> float:
        """0 if `client` may send now (one token spent), else seconds until it may."""
        if self.rate == 0:
            return 0.0
        now = self._clock()
        with self._lock:
            if now - self._swept > 60:
                self._buckets = {c: b for c, b in self._buckets.items() if now - b[1] < 60}
                self._swept = now
            tokens, then = self._buckets.get(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens < 1:
                self._buckets[client] = (tokens, now)
                return (1 - tokens) / self.rate
            self._buckets[client] = (tokens - 1, now)
            return 0.0
