"""Registry of wire formats. Importing this package registers every built-in format.

from refiner import formats
fmt = formats.get("hermes")
calls = fmt.parse_strict(text)          # raises formats.FormatError (and nothing else)
got = fmt.parse_lenient(text)           # never raises: got.calls, got.problems (typed: code + message)
text = fmt.render(calls)                # raises formats.RenderError for calls the format cannot write
formats.detect_format(text)             # "hermes", "apibank", ... or None

Every format is a row of the catalog (:mod:`refiner.formats.catalog`): a family and the grammar holding its shape."""

from refiner.formats import catalog  # noqa: F401  (registers every format)
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
    known,
    model_view,
    names,
    register,
)
from refiner.formats.detect import all_markers, detect_format, detect_with_calls  # noqa: F401
from refiner.formats.text import reasoning_offset, strip_reasoning  # noqa: F401
