"""Registry of wire formats. Importing this package registers every built-in format.

from refiner import formats
fmt = formats.get("hermes")
calls = fmt.parse_strict(text)          # raises formats.FormatError
got = fmt.parse_lenient(text)           # never raises: got.calls, got.problems
text = fmt.render(calls)
formats.detect_format(text)             # "hermes", "apibank", ... or None
"""

from refiner.formats import (  # noqa: F401  (each import registers a format)
    anthropic,
    apibank,
    glaive,
    hermes,
    nestful,
    nestools,
    openai,
    order,
    toolace,
    xlam,
)
from refiner.formats.base import (  # noqa: F401
    MAX_LENIENT_CHARS,
    FormatError,
    Lenient,
    WireFormat,
    all_formats,
    get,
    names,
    reasoning_offset,
    register,
)
from refiner.formats.detect import detect_format  # noqa: F401
