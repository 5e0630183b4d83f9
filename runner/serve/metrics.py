"""Prometheus metrics of ``runner serve`` (``GET /metrics``), with the
``prometheus-client`` library, in a registry of this server's own:

- ``runner_sessions{state}``: the sessions in the database by status, read
  when scraped (on PostgreSQL, every server's);
- ``runner_steps_total{outcome}``: hook steps this server ran (``finished``,
  ``failed``);
- ``runner_session_resumes_total``: sessions this server resumed, after its
  own restart or taken over from a server that died;
- ``runner_warm_sandboxes{agent,pool}``: sandboxes ready to claim in each
  agent's warm pool (``plain``, ``seeded``), read when scraped: a pool that
  stays at 0 under load is too small;
- ``runner_http_request_duration_seconds{method,route,status}``: request
  latency, by route template (never by session id).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .store.base import FINAL_STATUSES, OPEN_STATUSES

CONTENT_TYPE = CONTENT_TYPE_LATEST

_ROUTES = [
    (re.compile(r"^/v1/sessions/sess_[0-9a-f]{32}$"), "/v1/sessions/{id}"),
    (re.compile(r"^/v1/sessions/sess_[0-9a-f]{32}/messages$"), "/v1/sessions/{id}/messages"),
    (re.compile(r"^/v1/sessions/sess_[0-9a-f]{32}/events$"), "/v1/sessions/{id}/events"),
]
_PLAIN = {"/v1/sessions", "/openapi.json", "/healthz", "/readyz", "/metrics"}


def route_of(path: str) -> str:
    """The route template of ``path`` (``other`` for no route: bounded labels)."""
    if path in _PLAIN:
        return path
    for pattern, template in _ROUTES:
        if pattern.match(path):
            return template
    return "other"


class _SessionsByState:
    def __init__(self, count: Callable[[], dict[str, int]]) -> None:
        self.count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "runner_sessions", "Sessions in the database, by status.", labels=["state"]
        )
        counts = self.count()
        for state in (*OPEN_STATUSES, *FINAL_STATUSES):
            family.add_metric([state], counts.get(state, 0))
        yield family


class _WarmSandboxes:
    def __init__(self, count: Callable[[], dict[tuple[str, str], int]]) -> None:
        self.count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "runner_warm_sandboxes",
            "Sandboxes ready to claim in each agent's warm pool, by pool kind.",
            labels=["agent", "pool"],
        )
        for (agent, kind), count in sorted(self.count().items()):
            family.add_metric([agent, kind], count)
        yield family


class Metrics:
    def __init__(
        self,
        count_by_status: Callable[[], dict[str, int]],
        count_warm: Callable[[], dict[tuple[str, str], int]] = dict,
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_SessionsByState(count_by_status))  # type: ignore[arg-type]
        self.registry.register(_WarmSandboxes(count_warm))  # type: ignore[arg-type]
        self.steps = Counter(
            "runner_steps",
            "Hook steps this server ran, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.resumes = Counter(
            "runner_session_resumes",
            "Sessions this server resumed (after a restart, or taken over).",
            registry=self.registry,
        )
        self.latency = Histogram(
            "runner_http_request_duration_seconds",
            "HTTP request latency (to the end of the answer; event streams excluded).",
            ["method", "route", "status"],
            registry=self.registry,
        )

    def event(self, event: dict[str, Any]) -> None:
        """Count what an event of a session says."""
        kind = event.get("event")
        if kind == "step_finished":
            self.steps.labels("finished").inc()
        elif kind == "step_failed":
            self.steps.labels("failed").inc()
        elif kind == "session_resumed":
            self.resumes.inc()

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        if route == "/v1/sessions/{id}/events" and status == 200:
            return  # a stream lasts as long as its session: not a latency
        self.latency.labels(method, route, str(status)).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
