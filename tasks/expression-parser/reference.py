from collections.abc import Mapping


class ParseError(ValueError):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.position = position


def _tokenize(expr: str) -> list[tuple[str, str, int]]:
    tokens = []
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch in " \t":
            i += 1
        elif ch.isdigit():
            j = i
            while j < n and expr[j].isdigit():
                j += 1
            if j + 1 < n and expr[j] == "." and expr[j + 1].isdigit():
                j += 1
                while j < n and expr[j].isdigit():
                    j += 1
            tokens.append(("num", expr[i:j], i))
            i = j
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (expr[j].isalnum() or expr[j] == "_"):
                j += 1
            tokens.append(("name", expr[i:j], i))
            i = j
        elif ch in "+-*/%^()":
            tokens.append(("op", ch, i))
            i += 1
        else:
            raise ParseError(f"invalid character {ch!r}", i)
    tokens.append(("end", "", n))
    return tokens


class _Parser:
    """Recursive descent over the token list; builds a tree of tuples evaluated afterwards."""

    def __init__(self, tokens: list[tuple[str, str, int]]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def fail(self) -> ParseError:
        kind, text, pos = self.peek()
        if kind == "end":
            return ParseError("unexpected end of input", pos)
        return ParseError(f"unexpected {text!r}", pos)

    def parse(self):
        tree = self.chain("+-", self.term)
        if self.peek()[0] != "end":
            raise self.fail()
        return tree

    def chain(self, ops: str, operand):
        """A left-associative run kept flat, so long sums do not need deep recursion."""
        first = operand()
        rest = []
        while self.peek()[0] == "op" and self.peek()[1] in ops:
            op = self.peek()[1]
            self.i += 1
            rest.append((op, operand()))
        return ("chain", first, rest) if rest else first

    def term(self):
        return self.chain("*/%", self.unary)

    def unary(self):
        kind, text, _ = self.peek()
        if kind == "op" and text in "+-":
            self.i += 1
            return ("neg", self.unary()) if text == "-" else self.unary()
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek()[:2] == ("op", "^"):
            self.i += 1
            return ("pow", base, self.unary())
        return base

    def atom(self):
        kind, text, _ = self.peek()
        if kind == "num":
            self.i += 1
            return ("num", float(text))
        if kind == "name":
            self.i += 1
            return ("name", text)
        if (kind, text) == ("op", "("):
            self.i += 1
            inner = self.chain("+-", self.term)
            if self.peek()[:2] != ("op", ")"):
                raise self.fail()
            self.i += 1
            return inner
        raise self.fail()


def _power(base: float, exponent: float) -> float:
    if base < 0 and not exponent.is_integer():
        raise ValueError(f"{base} ^ {exponent} is not a real number")
    return base**exponent


def _eval(node, variables: Mapping[str, float]) -> float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "name":
        if node[1] not in variables:
            raise NameError(f"unknown variable {node[1]!r}")
        return float(variables[node[1]])
    if kind == "neg":
        return -_eval(node[1], variables)
    if kind == "pow":
        return _power(_eval(node[1], variables), _eval(node[2], variables))
    value = _eval(node[1], variables)
    for op, operand in node[2]:
        right = _eval(operand, variables)
        if op == "+":
            value += right
        elif op == "-":
            value -= right
        elif op == "*":
            value *= right
        elif op == "/":
            value /= right
        else:
            value %= right
    return value


def evaluate(expr: str, variables: Mapping[str, float] | None = None) -> float:
    tree = _Parser(_tokenize(expr)).parse()
    return _eval(tree, variables or {})
