def _check_delimiter(delimiter: str) -> None:
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"invalid delimiter {delimiter!r}")


def parse_record(line: str, delimiter: str = ",") -> list[str]:
    _check_delimiter(delimiter)
    fields: list[str] = []
    i, n = 0, len(line)
    while True:
        if i < n and line[i] == '"':
            i += 1
            chunk: list[str] = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted field")
                ch = line[i]
                if ch == '"':
                    if i + 1 < n and line[i + 1] == '"':
                        chunk.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                chunk.append(ch)
                i += 1
            fields.append("".join(chunk))
            if i < n and line[i] != delimiter:
                raise ValueError(f"unexpected {line[i]!r} after closing quote at {i}")
        else:
            end = line.find(delimiter, i)
            if end == -1:
                end = n
            field = line[i:end]
            if '"' in field:
                raise ValueError("quote inside an unquoted field")
            fields.append(field)
            i = end
        if i >= n:
            return fields
        i += 1  # skip the delimiter; a delimiter at the very end leaves one more (empty) field
        if i == n:
            fields.append("")
            return fields


def format_record(fields: list[str], delimiter: str = ",") -> str:
    _check_delimiter(delimiter)
    if not fields:
        raise ValueError("cannot format an empty record")
    out = []
    for field in fields:
        if any(c in field for c in (delimiter, '"', "\r", "\n")):
            out.append('"' + field.replace('"', '""') + '"')
        else:
            out.append(field)
    return delimiter.join(out)
