"""``tool-refiner serve``: the OpenAI-compatible refining proxy (see :mod:`refiner.proxy`)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import typer

from refiner import commands as shared
from refiner.engines import REFINER_KEY_ENV, UPSTREAM_KEY_ENV
from refiner.repair import UnknownTools


def parse_engine_args(items: list[str] | None) -> dict[str, Any]:
    """``["max_model_len=4096", "dtype=float32"]`` → keyword arguments; values are read as JSON when they parse
    (numbers, booleans), else kept as strings."""
    out: dict[str, Any] = {}
    for key, value in shared.key_values(items, "--engine-arg", "KEY=VALUE"):
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def content_calls_setting(values: list[str] | None) -> str | tuple[str, ...]:
    """``--content-calls`` values → the proxy's setting: ``"auto"`` when absent, ``"off"``, or format names."""
    names = [name for item in values or [] for name in shared.split_list(item)]
    if not names or names == ["auto"]:
        return "auto"
    if names == ["off"]:
        return "off"
    if "auto" in names or "off" in names:
        raise typer.BadParameter("--content-calls: auto and off cannot be combined with format names")
    return tuple(names)


def opens_reasoning_setting(values: list[str] | None) -> dict[str, bool]:
    """``--opens-reasoning`` values (``MODEL=yes|no``, also true/false, on/off, 1/0) -> model name -> bool."""
    words = {"yes": True, "true": True, "on": True, "1": True, "no": False, "false": False, "off": False, "0": False}
    pairs = shared.key_values(values, "--opens-reasoning", "MODEL=yes|no", split_last=True)
    bad = [value for _, value in pairs if value.strip().lower() not in words]
    if bad:
        raise typer.BadParameter(f"--opens-reasoning: expected yes or no, got {bad[0]!r}")
    return {model: words[value.strip().lower()] for model, value in pairs}


def build_refiner(*, model: str | None, refiner_base_url: str | None, engine: str | None,
                  refiner_api_key_env: str = REFINER_KEY_ENV, engine_kwargs: dict[str, Any] | None = None,
                  **options: Any) -> Any:
    """The CLI's refiner: tier 1 + guard without ``model`` and ``refiner_base_url``; else the pipeline over an engine
    (``openai`` with ``refiner_base_url``, otherwise ``engine``, default ``vllm``). ``options`` go to ``Refiner``."""
    from refiner.pipeline import Refiner

    if not model and not refiner_base_url:
        return Refiner(engine=None, **options)
    from refiner.engines import make_engine

    kind = engine or ("openai" if refiner_base_url else "vllm")
    kw: dict[str, Any] = dict(engine_kwargs or {})
    if kind == "openai":
        kw["api_key_env"] = refiner_api_key_env
    return Refiner(make_engine(kind, model=model, base_url=refiner_base_url, **kw), **options)


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        upstream_base_url: str = typer.Option(..., "--upstream-base-url", help="Upstream OpenAI-compatible URL "
                                              "ending in /v1 (e.g. http://127.0.0.1:8000/v1)."),
        refiner_base_url: str | None = shared.REFINER_BASE_URL,
        model: str | None = shared.MODEL,
        engine: str | None = shared.ENGINE,
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
        port: int = typer.Option(8080, "--port", help="Port to bind."),
        timeout: float = typer.Option(120.0, "--timeout", help="Upstream request timeout, seconds (504 after)."),
        n: int = shared.N,
        thinking: bool | None = shared.THINKING,
        max_tokens: int = shared.MAX_TOKENS,
        upstream_api_key_env: str = typer.Option(UPSTREAM_KEY_ENV, help="Environment variable holding the "
                                                 "upstream key (if unset, the client's Authorization is forwarded, "
                                                 "unless --api-key is set)."),
        api_key: str | None = typer.Option(None, "--api-key", envvar="TOOL_REFINER_API_KEY", show_default=False,
                                           help="Clients must send this key as their bearer token (401 otherwise; "
                                           "/health and /metrics stay open). Also read from TOOL_REFINER_API_KEY."),
        content_calls: list[str] | None = typer.Option(None, "--content-calls", help="Calls an upstream left in its "
                                                       "answer's text are moved to tool_calls: auto (default: any "
                                                       "known format), off, or a format name (repeatable)."),
        heal_history: bool = typer.Option(True, "--heal-history/--no-heal-history", help="Repair broken tool calls "
                                          "in the incoming conversation before forwarding it."),
        max_body_mb: float = typer.Option(8.0, "--max-body-mb", min=0.001, help="Largest request body accepted, in "
                                          "MiB (413 above)."),
        refine_timeout: float | None = typer.Option(None, "--refine-timeout", min=0.001, help="Most seconds "
                                                    "refinement may add to one response before the upstream answer "
                                                    "is returned as it came (default 5, or 60 with a model)."),
        workers: int | None = typer.Option(None, "--workers", min=0, help="Tier-1 worker processes (default: twice "
                                           "the CPU count, at least 4; 0: threads in the proxy process, no "
                                           "isolation)."),
        engine_arg: list[str] | None = shared.ENGINE_ARG,
        chat_template: str | None = typer.Option(None, "--chat-template", help="The upstream model's chat template "
                                                 "(.jinja, tokenizer_config.json or model folder): calls are read and "
                                                 "written in the dialect derived from it."),
        log_level: str = typer.Option("info", "--log-level", help="Log level of uvicorn and of the proxy (info: one "
                                      "line per request)."),
        calls_in_reasoning: bool = typer.Option(False, "--calls-in-reasoning/--no-calls-in-reasoning", help="Read "
                                                "calls written inside the upstream's reasoning when its answer holds "
                                                "none (default off: a call drafted while thinking is reasoning)."),
        opens_reasoning: list[str] | None = typer.Option(None, "--opens-reasoning", help="MODEL=yes|no (repeatable; "
                                                         "MODEL * for any model): whether that model's prompt "
                                                         "opens its reasoning block, so a streamed answer's reasoning "
                                                         "is sent as reasoning_content from its first token (default: "
                                                         "read from --chat-template, else learned from its answers)."),
        unknown_tools: UnknownTools = typer.Option("keep", "--unknown-tools", help="A call to a tool the "
                                          "request does not offer, no offered name near it: keep (reported) or "
                                          "drop."),
    ) -> None:
        """Run the refining proxy: clients call it like any OpenAI endpoint; returned tool calls come back refined."""
        import uvicorn

        from refiner.proxy import create_app

        try:
            ref = build_refiner(model=model, refiner_base_url=refiner_base_url, engine=engine, n=n, thinking=thinking,
                                max_tokens=max_tokens, engine_kwargs=parse_engine_args(engine_arg),
                                chat_template=chat_template, calls_in_reasoning=calls_in_reasoning,
                                unknown_tools=unknown_tools)
        except ValueError as e:  # an option the refiner refuses, named in its message
            raise typer.BadParameter(str(e)) from None
        logger = logging.getLogger("refiner")  # the proxy's own log lines on stderr, beside uvicorn's
        logger.setLevel(log_level.upper())
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False
        app = create_app(upstream_base_url, ref, api_key=os.environ.get(upstream_api_key_env) or None,
                         client_api_key=api_key or None, timeout=timeout,
                         content_calls=content_calls_setting(content_calls), heal_history=heal_history,
                         max_body_bytes=int(max_body_mb * 1024 * 1024), refine_timeout=refine_timeout,
                         workers=workers, chat_template=chat_template,
                         opens_reasoning=opens_reasoning_setting(opens_reasoning))
        what = "tier-1 repair + guard" if getattr(ref, "engine", None) is None else f"model {model or refiner_base_url}"
        locked = ", clients need the API key" if api_key else ""
        typer.echo(f"tool-refiner proxy on http://{host}:{port}/v1 -> {upstream_base_url} ({what}{locked})", err=True)
        uvicorn.run(app, host=host, port=port, log_level=log_level)
