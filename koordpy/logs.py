"""Logs as kube-scheduler writes them, on the standard library's logging.

The text format (the default) is klog's:

    I1124 10:00:00.123456   12345 binding.py:120] "Successfully bound pod to node" pod="default/web-0" ...

(severity I, W or E, month and day, local time to the microsecond, the process id in seven columns,
file and line, the message quoted as Go's %q, then `key=value` pairs: strings and errors quoted,
numbers, booleans, lists and maps as JSON, a string with line breaks on indented lines after
`key=<`). With
`--logging-format=json` every line is component-base's JSON object:
`{"ts":1732442400123.456,"caller":"scheduler/binding.py:120","msg":"...","v":2,"pod":"default/web-0"}`;
an error has no "v" and carries its error under "err", after its other keys.

Verbosity is klog's `-v`: a message at V(n) is written when n <= -v. `log.v(n)` checks that before
anything is built, so a disabled line costs one comparison:

    log = logs.get(__name__)
    if v2 := log.v(2):
        v2.info("Successfully bound pod to node", pod=key, node=node)

Records of plain `logging` calls (libraries, kopf, koordpy's older call sites) are placed on the
same scale: INFO at V(0), DEBUG at V(4); kopf's INFO at V(5) and DEBUG at V(6); the HTTP and API
client libraries' INFO at V(6) and DEBUG (request and response bodies) at V(8). kopf's ERROR lines
about a request it retries (an API server restarting) are V(2) information, not errors.

This module uses nothing but the standard library: the scheduling core logs through it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import traceback
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import IO, Any, Final, Literal

TEXT: Final = "text"
JSON: Final = "json"
FORMATS: Final = (TEXT, JSON)
Format = Literal["text", "json"]

# the verbosity at which tracebacks of logged exceptions are written (kube's debugging level)
TRACEBACK_VERBOSITY = 4
# record attributes this module sets through `extra`
_KV = "klog_kv"
_V = "klog_v"
_ERR = "klog_err"

# logger names whose plain records are placed by library rules (see _plain_verbosity)
_KOPF = "kopf"
_LIBRARIES = ("aiohttp", "kubernetes_asyncio", "urllib3", "asyncio")
# kopf's words for a request it tries again: an API server restarting, not a failure
_KOPF_TRANSIENT = ("will retry", "will re-authenticate")


def level_of(v: int) -> int:
    """The stdlib level of a V(v) message: INFO at V(0), one below per step, never NOTSET."""
    return max(1, logging.INFO - v)


class _State:
    verbosity = 0


_state = _State()


def verbosity() -> int:
    return _state.verbosity


def enabled(v: int) -> bool:
    return v <= _state.verbosity


class Verbose:
    """Messages at one verbosity, for a logger; false when that verbosity is not written."""

    __slots__ = ("_level", "_logger", "_v")

    def __init__(self, logger: logging.Logger, v: int) -> None:
        self._logger = logger
        self._v = v
        self._level = level_of(v)

    def __bool__(self) -> bool:
        return self._v <= _state.verbosity

    def info(self, msg: str, /, **kv: Any) -> None:
        if self._v <= _state.verbosity:
            self._logger.log(self._level, msg, extra={_KV: kv, _V: self._v}, stacklevel=2)


class Logger:
    """A stdlib logger that takes key/value pairs, as klog's structured calls do."""

    __slots__ = ("_logger", "_verbose", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger = logging.getLogger(name)
        self._verbose = tuple(Verbose(self._logger, v) for v in range(11))

    def v(self, v: int) -> Verbose:
        return self._verbose[v] if 0 <= v < len(self._verbose) else Verbose(self._logger, v)

    def info(self, msg: str, /, **kv: Any) -> None:
        self._logger.log(logging.INFO, msg, extra={_KV: kv, _V: 0}, stacklevel=2)

    def warning(self, msg: str, /, **kv: Any) -> None:
        self._logger.log(logging.WARNING, msg, extra={_KV: kv, _V: 0}, stacklevel=2)

    def error(self, msg: str, /, err: object = None, **kv: Any) -> None:
        """klog's ErrorS: `err` (an exception or its text) is written first, as `err="..."`."""
        exc_info = err if isinstance(err, BaseException) else None
        self._logger.log(
            logging.ERROR,
            msg,
            exc_info=exc_info,
            extra={_KV: kv, _V: 0, _ERR: err},
            stacklevel=2,
        )


def get(name: str) -> Logger:
    return Logger(name)


# ---------------------------------------------------------------------------------------------- values
_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(s: str) -> str:
    """`s` as Go's strconv.Quote writes it: printable characters as they are (the ASCII space is
    the only printable space), the usual backslash escapes, other control bytes as \\xNN and other
    non-printable characters as \\uNNNN or \\UNNNNNNNN."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = ['"']
    for ch in s:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Go's encoding/json also escapes these, so that JSON can sit in HTML and in JavaScript
_JSON_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(s: str) -> str:
    out = ['"']
    for ch in s:
        escaped = _JSON_ESCAPES.get(ch) or _JSON_HTML.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_float(f: float) -> str:
    """`f` as Go's encoding/json writes a float64: the shortest digits that read back, in plain
    notation unless below 1e-6 or at least 1e21 (then `1e+21`, `1e-7`)."""
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign = "-" if f < 0 else ""
    # repr() gives the shortest digits that read back, as Go's shortest formatting does
    _, digit_tuple, exponent = Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # digits before the decimal point
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        exp = point - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_json(value: Any) -> str:
    """`value` as klog writes a value that is neither a string nor an error: JSON, as Go's
    encoding/json encodes it (map keys sorted, no spaces)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            # Go's encoder refuses these; klog writes what it was told instead
            text = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
            return f'"<internal error: json: unsupported value: {text}>"'
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "{" + ",".join(f"{_json_string(str(k))}:{go_json(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        seq: Iterable[Any] = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return "[" + ",".join(go_json(v) for v in seq) + "]"
    return _json_string(error_text(value) if isinstance(value, BaseException) else str(value))


def error_text(err: object) -> str:
    if isinstance(err, BaseException):
        text = str(err)
        return f"{type(err).__name__}: {text}" if text else type(err).__name__
    return str(err)


def format_value(value: Any) -> str:
    """What follows `key` in a klog text line: strings, errors and any other object written as a
    string are quoted as Go's %q (`="..."`, or `=<` and indented lines when they hold line
    breaks), bytes as %+q, and numbers, booleans, None, lists and maps as JSON (`=3`, `=true`,
    `=null`, `=["a","b"]`, `={"k":1}`)."""
    if isinstance(value, str):
        return _string_value(value)
    if isinstance(value, bytes):
        return "=" + go_quote(value.decode("utf-8", "backslashreplace"))
    if isinstance(value, BaseException):
        return _string_value(error_text(value))
    if value is None or isinstance(value, int | float | Mapping | list | tuple | set | frozenset):
        return "=" + go_json(value)
    return _string_value(str(value))


def _string_value(text: str) -> str:
    if "\n" not in text:
        return "=" + go_quote(text)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines = lines[:-1]
    return "=<\n" + "".join(f"\t{line}\n" for line in lines) + " >"


# ---------------------------------------------------------------------------------------------- records
def _plain_verbosity(record: logging.LogRecord) -> tuple[int, int]:
    """(verbosity, level) of a record that did not come through Logger: see the module's text."""
    level = record.levelno
    name = record.name
    if name == _KOPF or name.startswith(_KOPF + "."):
        if level == logging.ERROR and any(w in record.getMessage() for w in _KOPF_TRANSIENT):
            return 2, logging.INFO
        if level >= logging.WARNING:
            return 0, level
        return (6 if level <= logging.DEBUG else 5), level
    if any(name == lib or name.startswith(lib + ".") for lib in _LIBRARIES):
        if level >= logging.WARNING:
            return 0, level
        return (8 if level <= logging.DEBUG else 6), level
    if level >= logging.INFO:
        return 0, level
    if level <= logging.DEBUG:
        return 4, level
    return logging.INFO - level, level


class VerbosityFilter(logging.Filter):
    """Lets through what the verbosity asks for, and nothing below `min_level` (the deprecated
    `--log-level warning|error`); places plain records on klog's scale on the way."""

    def __init__(self, verbosity: int, min_level: int = logging.NOTSET) -> None:
        super().__init__()
        self.verbosity = verbosity
        self.min_level = min_level

    def filter(self, record: logging.LogRecord) -> bool:
        v = getattr(record, _V, None)
        if v is None:
            v, level = _plain_verbosity(record)
            setattr(record, _V, v)
            if level != record.levelno:
                record.levelno = level
                record.levelname = logging.getLevelName(level)
        return bool(v <= self.verbosity and record.levelno >= self.min_level)


def _severity(levelno: int) -> str:
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


def _record_error(record: logging.LogRecord) -> object:
    err = getattr(record, _ERR, None)
    if err is None and record.exc_info and record.exc_info[1] is not None:
        err = record.exc_info[1]
    return err


def _stack(record: logging.LogRecord, verbosity: int) -> str | None:
    if verbosity < TRACEBACK_VERBOSITY or not record.exc_info or record.exc_info[1] is None:
        return None
    return "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")


class KlogFormatter(logging.Formatter):
    """klog's text format (see the module's text)."""

    def __init__(self, verbosity: int = 0, pid: int | None = None) -> None:
        super().__init__()
        self.verbosity = verbosity
        self.pid = os.getpid() if pid is None else pid

    def header(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        micros = min(999_999, round((record.created % 1) * 1_000_000))
        return (
            f"{_severity(record.levelno)}{t.tm_mon:02d}{t.tm_mday:02d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{micros:06d} "
            f"{self.pid:7d} {record.filename}:{record.lineno}] "
        )

    def format(self, record: logging.LogRecord) -> str:
        parts = [self.header(record), go_quote(record.getMessage())]
        err = _record_error(record)
        if err is not None:
            parts.append(" err" + format_value(error_text(err)))
        kv: Mapping[str, Any] = getattr(record, _KV, None) or {}
        for key, value in kv.items():
            parts.append(f" {key}{format_value(value)}")
        stack = _stack(record, self.verbosity)
        if stack is not None:
            parts.append(" stacktrace" + _string_value(stack))
        return "".join(parts)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        # zap writes these as strings: JSON has no number for them
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if isinstance(value, BaseException):
        return error_text(value)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return [_json_value(v) for v in sorted(value, key=str)]
    return str(value)


class JsonFormatter(logging.Formatter):
    """component-base's JSON format (see the module's text)."""

    def __init__(self, verbosity: int = 0) -> None:
        super().__init__()
        self.verbosity = verbosity

    def format(self, record: logging.LogRecord) -> str:
        directory = os.path.basename(os.path.dirname(record.pathname))
        caller = f"{directory}/{record.filename}" if directory else record.filename
        entry: dict[str, Any] = {
            "ts": record.created * 1000.0,
            "caller": f"{caller}:{record.lineno}",
            "msg": record.getMessage(),
        }
        is_error = record.levelno >= logging.ERROR
        if not is_error:
            entry["v"] = getattr(record, _V, 0)
        kv: Mapping[str, Any] = getattr(record, _KV, None) or {}
        for key, value in kv.items():
            entry[key] = _json_value(value)
        err = _record_error(record)
        if err is not None:
            entry["err"] = error_text(err)
        stack = _stack(record, self.verbosity)
        if stack is not None:
            entry["stacktrace"] = stack
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------- setup
class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The one handler `configure` installs (found again by its type when configured twice)."""


def _library_level(v: int, debug_at: int, info_at: int) -> int:
    if v >= debug_at:
        return logging.DEBUG
    if v >= info_at:
        return logging.INFO
    return logging.WARNING


def configure(
    verbosity: int = 0,
    fmt: str = TEXT,
    stream: IO[str] | None = None,
    min_level: int = logging.NOTSET,
) -> logging.Handler:
    """Every log line of the process in `fmt` on `stream` (standard error), at `verbosity`.
    Configuring again replaces what an earlier call set up."""
    if fmt not in FORMATS:
        raise ValueError(f"unsupported log format {fmt!r}: use {' or '.join(FORMATS)}")
    _state.verbosity = verbosity
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter(verbosity) if fmt == JSON else KlogFormatter(verbosity))
    handler.addFilter(VerbosityFilter(verbosity, min_level))
    root.addHandler(handler)
    # records nobody will write are not even made: the stdlib checks these levels first
    root.setLevel(min(level_of(verbosity), logging.DEBUG if verbosity >= 4 else logging.INFO))
    logging.getLogger(_KOPF).setLevel(_library_level(verbosity, 6, 5))
    for name in _LIBRARIES:
        logging.getLogger(name).setLevel(_library_level(verbosity, 8, 6))
    return handler


__all__ = [
    "FORMATS",
    "JSON",
    "TEXT",
    "Format",
    "JsonFormatter",
    "KlogFormatter",
    "Logger",
    "Verbose",
    "VerbosityFilter",
    "configure",
    "enabled",
    "error_text",
    "format_value",
    "get",
    "go_json",
    "go_quote",
    "level_of",
    "verbosity",
]
