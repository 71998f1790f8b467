"""Small text helpers shared by the record builders: name lists, template filling, placeholders."""

from __future__ import annotations

import string

_FORMATTER = string.Formatter()


def oxford(items: list[str] | tuple[str, ...]) -> str:
    """'A', 'A and B', 'A, B, and C' (Oxford comma)."""
    if not items:
        raise ValueError("oxford() needs at least one item")
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + ", and " + items[-1]


def placeholders(template: str) -> set[str]:
    """The {names} a template uses. Raises ValueError for '{}' / '{0}' / format specs / bad braces."""
    names = set()
    for _, name, spec, conversion in _FORMATTER.parse(template):
        if name is None:
            continue
        if not name or name.isdigit() or not name.isidentifier():
            raise ValueError(f"placeholder {{{name}}} must be a name such as {{per}}")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} must not have a format spec or conversion")
        names.add(name)
    return names


def check_templates(templates: list[str], allowed: set[str], required: set[str] | None = None) -> list[str]:
    """`templates` if each uses only `allowed` placeholders and every `required` one (default: all
    allowed); else a ValueError naming the template and the placeholder."""
    required = allowed if required is None else required
    for i, template in enumerate(templates):
        try:
            used = placeholders(template)
        except ValueError as err:
            raise ValueError(f"template [{i}] {template!r}: {err}") from None
        unknown = used - allowed
        if unknown:
            raise ValueError(
                f"template [{i}] {template!r}: unknown placeholder {{{sorted(unknown)[0]}}}; "
                f"allowed: {', '.join('{' + a + '}' for a in sorted(allowed)) or 'none'}"
            )
        missing = required - used
        if missing:
            raise ValueError(f"template [{i}] {template!r}: missing placeholder {{{sorted(missing)[0]}}}")
    return templates


def fill(template: str, **values: str | None) -> str:
    """Fill a template, capitalising its first letter when that letter is the template's own (a
    name that starts a sentence keeps its spelling: 'van Hagen', 'da Rocha Ltda.'). A name that
    ends with a period absorbs the template's period after it ('... works for Millet S.A.')."""
    if template[:1] != "{":
        template = template[:1].upper() + template[1:]
    for key, value in values.items():
        if value and value.endswith("."):
            template = template.replace("{" + key + "}.", "{" + key + "}")
    return template.format(**values)
