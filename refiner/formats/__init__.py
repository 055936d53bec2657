"""Registry of wire formats. Importing this package registers every built-in format.

from refiner import formats
fmt = formats.get("hermes")
calls = fmt.parse_strict(text)          # raises formats.FormatError (and nothing else)
got = fmt.parse_lenient(text)           # never raises: got.calls, got.problems (typed: code + message)
text = fmt.render(calls)                # raises formats.RenderError for calls the format cannot write
formats.detect_format(text)             # "hermes", "apibank", ... or None

A format is one module (the contract is :mod:`refiner.formats.base`); adding one means writing the module and
importing it below.
"""

from refiner.formats import (  # noqa: F401  (each import registers a format)
    anthropic,
    apibank,
    brace_kv,
    deepseek,
    glaive,
    glm45,
    harmony,
    hermes,
    json_calls,
    kimi_k2,
    kimi_k3,
    llama3,
    minimax_m3,
    mistral,
    named_json,
    nestful,
    nestools,
    openai,
    order,
    pythonic_sentinels,
    qwen3_coder,
    toolace,
    xlam,
    xml_params,
)
from refiner.formats.base import (  # noqa: F401
    MAX_ARGUMENT_DEPTH,
    MAX_LENIENT_CHARS,
    PROBLEM_CODES,
    Cut,
    Detection,
    FormatError,
    Lenient,
    Problem,
    RenderError,
    WireFormat,
    all_formats,
    by_rank,
    get,
    model_view,
    names,
    register,
    same_texts,
)
from refiner.formats.detect import all_markers, detect_format, detect_with_calls  # noqa: F401
from refiner.formats.text import reasoning_offset, strip_reasoning  # noqa: F401
