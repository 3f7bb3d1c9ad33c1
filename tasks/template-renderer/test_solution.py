from types import SimpleNamespace

import pytest

from solution import Template, TemplateError, render


def test_example():
    assert render("Hi {{ user.name | html }}, \\{{not a tag}}", {"user": {"name": "<Bo>"}}) == "Hi &lt;Bo&gt;, {{not a tag}}"


def test_plain_text_and_whitespace_in_tags():
    assert render("", {}) == ""
    assert render("no tags } { }}", {}) == "no tags } { }}"
    assert render("{{a}}-{{  a  }}-{{\n\ta\n}}", {"a": 1}) == "1-1-1"


def test_values_are_stringified():
    ctx = {"n": None, "z": 0, "f": 1.5, "l": [1, 2], "b": False}
    assert render("[{{n}}][{{z}}][{{f}}][{{l}}][{{b}}]", ctx) == "[][0][1.5][[1, 2]][False]"


def test_dotted_lookup_mapping_and_attributes():
    ctx = {"order": {"customer": SimpleNamespace(name="Ann", address={"city": "Oslo"})}}
    assert render("{{ order.customer.name }} in {{order.customer.address.city}}", ctx) == "Ann in Oslo"


def test_missing_values():
    with pytest.raises(TemplateError):
        render("{{ missing }}", {})
    with pytest.raises(TemplateError):
        render("{{ a.b }}", {"a": {}})
    with pytest.raises(TemplateError):
        render("{{ a.nope }}", {"a": SimpleNamespace(x=1)})
    with pytest.raises(TemplateError):
        render("{{ a.b }}", {"a": None})


def test_filters_chain_left_to_right():
    ctx = {"s": "  Mixed Case  "}
    assert render("{{ s | strip | upper }}", ctx) == "MIXED CASE"
    assert render("{{s|lower}}", ctx) == "  mixed case  "
    assert render("[{{ s |strip|lower| upper }}]", ctx) == "[MIXED CASE]"


def test_html_escapes_each_character_once():
    assert render("{{ v | html }}", {"v": "a & b < c > d \" e ' f"}) == "a &amp; b &lt; c &gt; d &quot; e &#39; f"
    assert render("{{ v | html }}", {"v": "&lt;"}) == "&amp;lt;"
    assert render("{{ v | html | html }}", {"v": "<"}) == "&amp;lt;"
    assert render("{{ v }}", {"v": "<b>"}) == "<b>"


def test_escaped_tags_and_backslashes():
    assert render("\\{{ x }}", {}) == "{{ x }}"
    assert render("a\\b \\{ {{x}}\\", {"x": "!"}) == "a\\b \\{ !\\"
    assert render("\\{{{{x}}", {"x": 1}) == "{{1"


def test_values_not_rescanned():
    assert render("{{ a }}", {"a": "{{ b }}", "b": "no"}) == "{{ b }}"


def test_tag_ends_at_first_close():
    assert render("{{a}}}", {"a": "x"}) == "x}"
    with pytest.raises(TemplateError):
        Template("{{ a }")


@pytest.mark.parametrize(
    "source",
    ["{{", "text {{ a", "{{}}", "{{   }}", "{{ a b }}", "{{ a. }}", "{{ .a }}", "{{ 1x }}", "{{ a .b }}",
     "{{ a | }}", "{{ a || upper }}", "{{ a | shout }}", "{{ a | upper lower }}", "{{ _a }}", "{{ | upper }}"],
)
def test_syntax_errors_at_construction(source):
    with pytest.raises(TemplateError):
        Template(source)


def test_template_reusable():
    t = Template("Dear {{ name | strip }},")
    assert t.render({"name": " Ann "}) == "Dear Ann,"
    assert t.render({"name": "Bob"}) == "Dear Bob,"
    with pytest.raises(TemplateError):
        t.render({})
