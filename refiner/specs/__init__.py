"""Tool specs from every schema dialect the sources use, normalised to one description.

    from refiner.specs import load_tools, to_openai_tools
    specs = load_tools(record["tools"])          # list[ToolSpec]; dialect detected per tool
    specs[0].params["length"].type               # "integer" (JSON Schema vocabulary, or None when unknown)
    to_openai_tools(specs)                       # OpenAI ``tools`` list
    tool_catalog(request["tools"])               # ToolCatalog: names at once, each spec read when asked for

See :mod:`refiner.specs.dialects` for the dialects and their rules.
"""

from refiner.specs.catalog import ToolCatalog, ToolList, loads_keeping_tools, tool_catalog
from refiner.specs.dialects import DIALECTS, detect_one, spec_from_dict
from refiner.specs.loader import detect_dialect, load_tools
from refiner.specs.model import Param, SpecError, ToolSpec, by_name, render_tool_list, to_openai_tools
from refiner.specs.types import JSON_TYPES, parse_type

__all__ = ["DIALECTS", "JSON_TYPES", "Param", "SpecError", "ToolCatalog", "ToolList", "ToolSpec", "by_name",
           "detect_dialect", "detect_one", "load_tools", "loads_keeping_tools", "parse_type", "render_tool_list",
           "spec_from_dict", "to_openai_tools", "tool_catalog"]
