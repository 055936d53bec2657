"""The proxy's Prometheus metrics at ``GET /metrics`` (listed in docs/serving.md). Each app has its own registry;
labels take a few known values only (routes, statuses, stages, repair and error kinds), never a client's path, a model
name, a key or a body.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

CONTENT_TYPE = CONTENT_TYPE_LATEST
REFINED_ROUTES = ("/v1/chat/completions", "/v1/responses")
ADDED_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UPSTREAM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def repair_classes(result: dict) -> dict[str, int]:
    """One pipeline result's repairs by class: tier 1's actions, else the gate's errors in the upstream's answer."""
    kinds = [a.get("code") for a in result.get("actions") or [] if isinstance(a, dict)]
    if not kinds:
        kinds = [d.get("code") for d in result.get("upstream_diagnostics") or []
                 if isinstance(d, dict) and d.get("severity") == "error"]
    return dict(collections.Counter(str(k) for k in kinds if k))


class Metrics:
    """The counters and histograms of one proxy app (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("tool_refiner_requests", "Requests answered, by route and HTTP status",
                                ["route", "status"], registry=r)
        self.refused = Counter("tool_refiner_refused", "Requests refused before reaching the upstream: auth (401), "
                               "size (413)", ["reason"], registry=r)
        self.upstream_errors = Counter("tool_refiner_upstream_errors", "Upstream failures, by kind", ["kind"],
                                       registry=r)
        self.stages = Counter("tool_refiner_choices", "Answers (choices) by the stage x-tool-refiner reports",
                              ["stage"], registry=r)
        self.calls = Counter("tool_refiner_calls_read", "Tool calls returned, by where they were read (tool_calls, "
                             "content)", ["source"], registry=r)
        self.repairs = Counter("tool_refiner_repairs", "Repairs by class (tier-1 repair kind, or the gate's finding "
                               "in an answer the model rewrote) and the answer's stage", ["class", "stage"], registry=r)
        self.model_calls = Counter("tool_refiner_model_calls", "Answers sent to the refiner model, by the stage that "
                                   "came of it (model, fallback, timeout, error)", ["outcome"], registry=r)
        self.added = Histogram("tool_refiner_added_seconds", "Time the proxy adds to a request (its time less the "
                               "upstream's)", ["route", "mode"], buckets=ADDED_BUCKETS, registry=r)
        self.upstream = Histogram("tool_refiner_upstream_seconds", "The upstream's time, from request to the end of "
                                  "its answer", ["route", "mode"], buckets=UPSTREAM_BUCKETS, registry=r)

    def request(self, path: str, status: int, *, mode: str = "whole", refused: str | None = None,
                upstream_error: str | None = None, total: float | None = None,
                upstream: float | None = None) -> None:
        """One request answered (its path labelled as a refined route, ``/v1/{path}`` for any other under ``/v1``,
        else ``other``); ``total`` and ``upstream``: its time and the upstream's, in seconds."""
        route = path if path in REFINED_ROUTES else "/v1/{path}" if path.startswith("/v1/") else "other"
        self.requests.labels(route, str(status)).inc()
        if refused:
            self.refused.labels(refused).inc()
        if upstream_error:
            self.upstream_errors.labels(upstream_error).inc()
        if upstream is not None and total is not None and route in REFINED_ROUTES and status < 400:
            self.upstream.labels(route, mode).observe(upstream)
            self.added.labels(route, mode).observe(max(0.0, total - upstream))

    def choices(self, results: Iterable[Any]) -> None:
        """The refined answers of one response (:class:`~refiner.proxy.refining.ChoiceResult`)."""
        for r in results:
            self.stages.labels(r.stage).inc()
            calls = r.message.get("tool_calls") if isinstance(r.message, dict) else None
            if isinstance(calls, list) and calls:
                self.calls.labels("content" if r.content_format else "tool_calls").inc(len(calls))
            for kind, n in r.repairs.items():
                self.repairs.labels(kind, r.stage).inc(n)
            if r.model:
                self.model_calls.labels(r.stage).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
