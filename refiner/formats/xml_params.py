# The catalog imports these spellings from here until it imports them from refiner.formats.xml_spelling.
from refiner.formats.xml_spelling import dsml, invoke, kv  # noqa: F401
