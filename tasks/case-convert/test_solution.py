import random

import pytest

from solution import split_words, to_camel, to_kebab, to_pascal, to_snake


@pytest.mark.parametrize(
    "name, words",
    [
        ("user_id", ["user", "id"]),
        ("userId", ["user", "Id"]),
        ("UserId", ["User", "Id"]),
        ("content-type", ["content", "type"]),
        ("Hello World", ["Hello", "World"]),
        ("__a--b  c_", ["a", "b", "c"]),
        ("HTTPServer", ["HTTP", "Server"]),
        ("parseURL", ["parse", "URL"]),
        ("parseURLQuick", ["parse", "URL", "Quick"]),
        ("XMLHttpRequest", ["XML", "Http", "Request"]),
        ("ABc", ["A", "Bc"]),
        ("v2Api", ["v2", "Api"]),
        ("utf8Encoder", ["utf8", "Encoder"]),
        ("HTTP2Server", ["HTTP2", "Server"]),
        ("2fast", ["2fast"]),
        ("area51", ["area51"]),
        ("ID", ["ID"]),
        ("a", ["a"]),
        ("", []),
        ("_-_ ", []),
    ],
)
def test_split_words(name, words):
    assert split_words(name) == words


def test_snake_and_kebab():
    assert to_snake("HTTPServer") == "http_server"
    assert to_snake("userId") == "user_id"
    assert to_snake("content-type") == "content_type"
    assert to_kebab("userId") == "user-id"
    assert to_kebab("XMLHttpRequest") == "xml-http-request"
    assert to_snake("") == "" and to_kebab("--") == ""


def test_camel_and_pascal():
    assert to_camel("http_server") == "httpServer"
    assert to_camel("XMLHttpRequest") == "xmlHttpRequest"
    assert to_camel("user_ID") == "userId"
    assert to_camel("Version 2 beta") == "version2Beta"
    assert to_pascal("user_id") == "UserId"
    assert to_pascal("parseURL") == "ParseUrl"
    assert to_pascal("2fast_cars") == "2fastCars"
    assert to_camel("") == "" and to_pascal("_") == ""


def test_invalid_characters():
    for bad in ["user.id", "a/b", "café", "tab\there", "x!"]:
        with pytest.raises(ValueError):
            split_words(bad)
        with pytest.raises(ValueError):
            to_snake(bad)


def test_round_trips():
    rng = random.Random(12)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(300):
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 6))) for _ in range(rng.randint(1, 4))]
        snake = "_".join(words)
        assert to_snake(to_camel(snake)) == snake
        assert to_snake(to_pascal(snake)) == snake
        assert to_kebab(snake) == "-".join(words)
        assert to_camel(to_kebab(snake)) == to_camel(snake)
        assert [w.lower() for w in split_words(to_pascal(snake))] == words


def test_single_letter_words_merge_into_acronyms():
    # Documented consequence of rule 3: camel-cased single letters read back as an acronym.
    assert split_words("vWE") == ["v", "WE"]
    assert to_snake(to_camel("v_w_e")) == "v_we"


def test_acronym_run_then_word():
    assert to_snake("getHTTPResponseCode") == "get_http_response_code"
    assert to_snake("IOError") == "io_error"
