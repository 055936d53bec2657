"""tool-refiner: corrects the tool calls of any upstream LLM.

The pieces, in the order a request meets them:
    refiner.formats   wire formats (parse strict / lenient, render), the rows of one catalog, in a registry
    refiner.calls     the canonical call model (ToolCall)
    refiner.specs     tool specs from every schema dialect, normalised
    refiner.gate      the schema gate (structured diagnostics)
    refiner.repair    tier-1 repair, no model
    refiner.prompt    the refiner's prompt (shared with the data builder)
    refiner.engines   generation engines (vLLM offline, OpenAI-compatible HTTP, transformers)
    refiner.pipeline  request -> gate -> repair -> model -> guard
"""

from pathlib import Path

from refiner.calls import ToolCall, calls_equal, canonical_json  # noqa: F401

__version__ = "0.1.0"
PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the repository (configs/, .cache/, rewards/)
