import difflib


def diff(a: list[str], b: list[str]) -> list[tuple[str, str]]:
    script: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            script.extend(("=", item) for item in a[i1:i2])
        else:
            script.extend(("-", item) for item in a[i1:i2])
            script.extend(("+", item) for item in b[j1:j2])
    return script
