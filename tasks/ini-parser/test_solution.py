import pytest

from solution import ParseError, parse_ini


def error_line(text):
    with pytest.raises(ParseError) as info:
        parse_ini(text)
    assert isinstance(info.value, ValueError)
    return info.value.line


def test_sections_and_keys():
    text = "[server]\nhost = example.org\nport=8080\n\n[client]\nretries = 3\n"
    assert parse_ini(text) == {"server": {"host": "example.org", "port": "8080"}, "client": {"retries": "3"}}


def test_order_is_kept():
    result = parse_ini("[b]\nz=1\na=2\n[a]\n")
    assert list(result) == ["b", "a"]
    assert list(result["b"]) == ["z", "a"]
    assert result["a"] == {}


def test_comments_blank_lines_and_crlf():
    text = "; top comment\r\n# another\r\n   \r\n[s]\r\n  ; indented comment\r\nk = v ; not a comment\r\n"
    assert parse_ini(text) == {"s": {"k": "v ; not a comment"}}


def test_global_section_only_when_used():
    assert parse_ini("a = 1\n[s]\nb = 2") == {"": {"a": "1"}, "s": {"b": "2"}}
    assert "" not in parse_ini("# c\n[s]\nb = 2")
    assert parse_ini("") == {}


def test_values_keys_and_quotes():
    result = parse_ini('[S]\nKey = a=b=c\nempty =\nq = "  padded "\none = "\nmixed = "x" y\n[ Spaced Name ]\n')
    assert result == {
        "S": {"key": "a=b=c", "empty": "", "q": "  padded ", "one": '"', "mixed": '"x" y'},
        "Spaced Name": {},
    }


def test_section_names_case_sensitive():
    assert parse_ini("[A]\nx=1\n[a]\nx=2") == {"A": {"x": "1"}, "a": {"x": "2"}}


def test_duplicate_section_line():
    assert error_line("[a]\nx=1\n\n[a]\n") == 4


def test_duplicate_key_case_insensitive():
    assert error_line("[a]\nName = 1\nname = 2\n") == 3
    assert error_line("[a]\nname = 1\nNAME = 2\n") == 3
    assert error_line("x=1\n[s]\n\nx=2\nX=3") == 5


def test_same_key_in_other_sections_is_fine():
    assert parse_ini("k=0\n[a]\nk=1\n[b]\nK=2") == {"": {"k": "0"}, "a": {"k": "1"}, "b": {"k": "2"}}


@pytest.mark.parametrize(
    "text, line",
    [
        ("[ok]\n[ ]\n", 2),
        ("[s]\n = value\n", 2),
        ("[s]\na=1\njust text\n", 3),
        ("# c\n[unclosed\n", 2),
        ("\n\n\nnot]\n", 4),
    ],
)
def test_errors_carry_line_numbers(text, line):
    assert error_line(text) == line


def test_parse_error_constructor():
    error = ParseError("boom", 7)
    assert error.line == 7
    assert isinstance(error, ValueError)
