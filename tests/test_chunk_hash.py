"""The fast whitespace collapse in schemas/chunk_hash.py is the documented regex one."""

from __future__ import annotations

import random
import re
import unicodedata

from midtrace.schemas.chunk_hash import normalize_text

DOCUMENTED = re.compile(r"\s+")


def test_split_join_equals_the_documented_regex() -> None:
    whitespace = [chr(c) for c in range(0x3100) if DOCUMENTED.match(chr(c))]
    assert len(whitespace) > 20
    pool = whitespace + list("ab e\u0301\u00e9\u212b\u00a0")
    rng = random.Random(5)
    for _ in range(5000):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 12)))
        expected = DOCUMENTED.sub(" ", unicodedata.normalize("NFC", text)).strip()
        assert normalize_text(text) == expected, repr(text)
