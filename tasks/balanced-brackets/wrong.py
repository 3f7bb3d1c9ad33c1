PAIRS = {")": "(", "]": "[", "}": "{"}
OPENERS = set(PAIRS.values())


def bracket_error(text: str) -> int | None:
    stack: list[int] = []
    for index, char in enumerate(text):
        if char in OPENERS:
            stack.append(index)
        elif char in PAIRS:
            if not stack or text[stack[-1]] != PAIRS[char]:
                return index
            stack.pop()
    return stack[-1] if stack else None


def is_balanced(text: str) -> bool:
    return bracket_error(text) is None
