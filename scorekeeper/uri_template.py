"""Dated runs: `{date}` and `{scheduled:FORMAT}` in input_uri, ground_truth_uri, output_uri and run_name.

A scheduled deployment reads tonight's folder (`s3://bucket/incoming/{date-1d}/`) and writes a run
named after it (`monitor-{date-1d}`). The placeholders are filled with one moment, in UTC: the flow
run's scheduled time, the `as_of` parameter for a backfill, or now (docs/inputs.md, "Dated runs").

The grammar, exactly (anything else is refused naming the template and the place):

    template    := (literal | placeholder)*
    literal     := any character but '{' and '}'
    placeholder := '{' name [offset] [':' format] '}'
    name        := 'date'                       the day, YYYY-MM-DD (takes no format)
                 | 'scheduled'                  the moment, in the format given (required)
    offset      := ('+' | '-') 1-4 digits ('d' | 'h')       days or hours added before formatting
    format      := (any character but '{', '}', '%', a control character | '%' directive)+
    directive   := one of FORMAT_DIRECTIVES     strftime's, those that do not depend on the locale

A braces-free string is its own filling, so a filled value is never filled again differently
(`fill(fill(t, a), b) == fill(t, a)`), and a URI without braces means what it always meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

# strftime directives whose output does not depend on the locale or the platform (no %a, %b,
# %p, %c, %x; no glibc's %-d): a template fills the same on every worker.
FORMAT_DIRECTIVES = "YymdHMSjUWwGVuIzZ%"
NAMES = ("date", "scheduled")
TEMPLATE_FIELDS = ("input_uri", "ground_truth_uri", "output_uri", "run_name")
"""The parameters whose placeholders are filled (docs/inputs.md)."""

_PLACEHOLDER = re.compile(r"\{(?P<body>[^{}]*)\}")
_BODY = re.compile(r"(?P<name>[a-z_]+)(?P<offset>[+-][0-9]{1,4}[dh])?(?::(?P<format>.+))?", re.DOTALL)
_DIRECTIVE = re.compile(r"%(.?)", re.DOTALL)
GRAMMAR = "{date}, {date-1d}, {scheduled:%Y/%m/%d}, {scheduled+6h:%Y%m%dT%H}"


class TemplateError(ValueError):
    """A template outside the grammar; the message names the template and what is wrong."""


@dataclass(frozen=True)
class Placeholder:
    name: str
    offset: timedelta
    format: str

    def fill(self, when: datetime) -> str:
        try:
            return (when + self.offset).strftime(self.format)
        except OverflowError:
            raise TemplateError(f"{when:%Y-%m-%d} {self.offset} lies outside the years 1-9999") from None


def parse(template: str) -> list[str | Placeholder]:
    """The template's parts in order: literal text and placeholders; TemplateError outside the grammar."""
    parts: list[str | Placeholder] = []
    position = 0
    for match in _PLACEHOLDER.finditer(template):
        _literal(template, template[position : match.start()], parts)
        parts.append(_placeholder(template, match["body"]))
        position = match.end()
    _literal(template, template[position:], parts)
    return parts


def _literal(template: str, text: str, parts: list[str | Placeholder]) -> None:
    if "{" in text or "}" in text:
        brace = "{" if "{" in text else "}"
        raise TemplateError(
            f"{template!r}: a '{brace}' that does not open or close a placeholder; braces hold only placeholders ({GRAMMAR})"
        )
    if text:
        parts.append(text)


def _placeholder(template: str, body: str) -> Placeholder:
    match = _BODY.fullmatch(body)
    name = match["name"] if match else None
    if match is None or name not in NAMES:
        known = next((n for n in NAMES if body.startswith(n)), None)
        if known is not None:
            raise TemplateError(
                f"{template!r}: malformed placeholder {{{body}}}: an offset is +Nd, -Nd, +Nh or -Nh (N up to 4 digits) "
                f"and a format follows ':' ({GRAMMAR})"
            )
        raise TemplateError(f"{template!r}: unknown placeholder {{{body}}}; the placeholders are {GRAMMAR}")
    amount, unit = (int(match["offset"][:-1]), match["offset"][-1]) if match["offset"] else (0, "d")
    offset = timedelta(days=amount) if unit == "d" else timedelta(hours=amount)
    form = match["format"]
    if name == "date":
        if form is not None:
            raise TemplateError(f"{template!r}: {{{body}}}: {{date}} is always YYYY-MM-DD; another format is {{scheduled:FORMAT}}")
        return Placeholder(name, offset, "%Y-%m-%d")
    if form is None:
        raise TemplateError(f"{template!r}: {{{body}}} needs a format, e.g. {{scheduled:%Y/%m/%d}}")
    if any(ord(c) < 32 or ord(c) == 127 for c in form):
        raise TemplateError(f"{template!r}: {{{body}}}: a control character in the format")
    for directive in _DIRECTIVE.findall(form):
        if directive == "" or directive not in FORMAT_DIRECTIVES:
            shown = f"%{directive}" if directive else "a '%' at the end"
            raise TemplateError(
                f"{template!r}: {{{body}}}: {shown} is not a format directive here; "
                f"these are: {', '.join('%' + d for d in FORMAT_DIRECTIVES)} (strftime's, those that do not depend on the locale)"
            )
    return Placeholder(name, offset, form)


def is_template(value: str | None) -> bool:
    """Whether the value holds a placeholder (or a brace the grammar refuses)."""
    return value is not None and ("{" in value or "}" in value)


def fill(template: str, when: datetime) -> str:
    """The template with every placeholder filled from `when` (a UTC moment)."""
    return "".join(part if isinstance(part, str) else part.fill(when) for part in parse(template))


# -- the moment a run is filled with -------------------------------------------------------------
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_as_of(text: str) -> datetime:
    """`as_of` as a UTC moment: a date (YYYY-MM-DD, its midnight UTC) or an ISO 8601 date and time
    (with an offset or Z; without one it is UTC). Refuses anything else (ValueError, one line)."""
    value = text.strip()
    try:
        if _DATE.fullmatch(value):
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        moment = None
    if moment is None or not _DATE.match(value):
        raise ValueError(f"{text!r} is neither a date (YYYY-MM-DD) nor an ISO 8601 time (YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM])")
    return utc(moment)


def utc(moment: datetime) -> datetime:
    """The moment in UTC, to the second (a naive one is taken as UTC)."""
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.replace(microsecond=0)


def as_of_text(moment: datetime) -> str:
    """The canonical spelling of a fill moment (request.json's `as_of`): 2026-12-03T02:30:00Z."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")
