"""Java ``.properties`` files as ``java.util.Properties.load`` reads them, and written back.

Pure: text in, a dict out (and back); no I/O, no clock.

The rules (``java.util.Properties#load(Reader)``): a logical line may continue on the next natural
line after an odd number of trailing backslashes (the next line's leading whitespace is dropped);
a line whose first non-blank character is ``#`` or ``!`` is a comment (and never continues);
the key ends at the first unescaped ``=``, ``:`` or whitespace, then blanks, at most one ``=`` or
``:``, and blanks again precede the value; ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are
escapes, and a backslash before any other character stands for that character. A key given twice
keeps its last value.
"""

from __future__ import annotations

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A properties text that cannot be read (a malformed ``\\uXXXX`` escape), with its line number."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) for every line that is neither blank nor a comment."""
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    result: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        number, line = i + 1, natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0 or i >= len(natural):
                parts.append(line[:-1] if trailing % 2 else line)
                break
            parts.append(line[:-1])
            line = natural[i].lstrip(_BLANK)
            i += 1
        result.append((number, "".join(parts)))
    return result


def _unescape(text: str, number: int) -> str:
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 >= len(text):
            if char != "\\":
                out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"line {number}: malformed \\uXXXX escape {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(following, following))
        i += 2
    joined = "".join(out)
    try:  # \uD83D\uDE00: a surrogate pair escaped as Java writes it, one character
        return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:  # a lone surrogate stays as it is
        return joined


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:" or char in _BLANK:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def loads(text: str) -> dict[str, str]:
    """The properties of ``text``, in the order their keys first appear; :class:`PropertiesError` when malformed."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        result[_unescape(raw_key, number)] = _unescape(raw_value, number)
    return result


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "=:#!" or (char == " " and (is_key or i == 0)):
            out.append("\\" + char)
        elif not char.isprintable() or ord(char) > 0xFFFF:
            out.append("".join(f"\\u{unit:04x}" for unit in _utf16_units(char)))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[j : j + 2], "big") for j in range(0, len(data), 2)]


def dumps(properties: dict[str, str]) -> str:
    """``properties`` as a properties text that :func:`loads` reads back the same."""
    return "".join(f"{_escape(key, True)}={_escape(value, False)}\n" for key, value in properties.items())
