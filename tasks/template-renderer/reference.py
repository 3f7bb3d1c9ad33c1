import re
from collections.abc import Mapping


class TemplateError(Exception):
    pass


def _html(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


FILTERS = {"upper": str.upper, "lower": str.lower, "strip": str.strip, "html": _html}
_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_PATH = re.compile(rf"{_NAME}(?:\.{_NAME})*")
_FILTER = re.compile(_NAME)


class Template:
    def __init__(self, source: str) -> None:
        self._parts: list[str | tuple[list[str], list[str]]] = []
        text: list[str] = []
        i = 0
        while i < len(source):
            if source.startswith("\\{{", i):
                text.append("{{")
                i += 3
            elif source.startswith("{{", i):
                end = source.find("}}", i + 2)
                if end == -1:
                    raise TemplateError(f"tag opened at {i} is never closed")
                self._parts.append("".join(text))
                text = []
                self._parts.append(self._parse_tag(source[i + 2 : end]))
                i = end + 2
            else:
                text.append(source[i])
                i += 1
        self._parts.append("".join(text))

    @staticmethod
    def _parse_tag(content: str) -> tuple[list[str], list[str]]:
        path, *filters = [piece.strip() for piece in content.split("|")]
        if not path:
            raise TemplateError("empty tag")
        if not _PATH.fullmatch(path):
            raise TemplateError(f"invalid path {path!r}")
        for name in filters:
            if not _FILTER.fullmatch(name):
                raise TemplateError(f"invalid filter {name!r} in {content.strip()!r}")
            if name not in FILTERS:
                raise TemplateError(f"unknown filter {name!r}; known: {', '.join(sorted(FILTERS))}")
        return path.split("."), filters

    def render(self, context: Mapping[str, object]) -> str:
        out = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            path, filters = part
            value: object = context
            for depth, name in enumerate(path):
                try:
                    value = value[name] if isinstance(value, Mapping) else getattr(value, name)
                except (KeyError, AttributeError):
                    raise TemplateError(f"{'.'.join(path[: depth + 1])} is not defined") from None
            text = "" if value is None else str(value)
            for name in filters:
                text = FILTERS[name](text)
            out.append(text)
        return "".join(out)


def render(source: str, context: Mapping[str, object]) -> str:
    return Template(source).render(context)
