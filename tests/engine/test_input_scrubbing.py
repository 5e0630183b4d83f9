"""Session inputs: validation, defaults and secret forms, attacked in-process.

Each test pins one decision of ``runner.engine.inputs`` exactly: which values are
refused and how the message reads (never the secret value), which defaults are
filled in, and every form a secret is scrubbed in.
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import quote

import pytest

from runner.core.errors import SdkError, SessionInputError
from runner.core.redaction import MASK, _ansi_c, scrub, secret_forms
from runner.engine.inputs import SessionInput, annotation_schema, closest, secret_strings


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (Annotated[int, "doc"], {"type": "integer"}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (list, {"type": "array"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}}),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    ],
)
def test_each_supported_annotation_has_its_exact_schema(annotation, schema) -> None:
    assert annotation_schema(annotation, where="X.f") == schema


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (dict[int, str], r"^X\.f: dict keys must be str, got <class 'int'>$"),
        (bytes, r"^X\.f: unsupported type <class 'bytes'>; use str, int"),
    ],
)
def test_an_unsupported_annotation_is_an_sdk_error_naming_the_field(annotation, message) -> None:
    with pytest.raises(SdkError, match=message):
        annotation_schema(annotation, where="X.f")


def repo_class() -> type[SessionInput]:
    """Built inside each test: a class made at import would escape the mutant under test."""

    class Repo(SessionInput):
        input_id = "acme.repo"
        limit: ClassVar[int] = 3  # not a field
        _private: int = 0  # not a field
        name: str
        branch: str = "main"
        tags: list[str] = []  # a default is JSON data, deep-copied per instance

    return Repo


def test_a_derived_schema_lists_fields_defaults_and_what_is_required() -> None:
    Repo = repo_class()
    schema = Repo.json_schema()
    assert schema["title"] == "acme.repo"
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {
        "name": {"type": "string"},
        "branch": {"type": "string", "default": "main"},
        "tags": {"type": "array", "items": {"type": "string"}, "default": []},
    }
    assert Repo.__field_names__ == ("name", "branch", "tags")


def test_an_instance_gets_defaults_copied_and_is_read_only() -> None:
    Repo = repo_class()
    first, second = Repo(name="x"), Repo.from_value({"name": "x"})
    assert first == second and hash(first) == hash(second)
    assert first.to_dict() == {"name": "x", "branch": "main", "tags": []}
    first.to_dict()["tags"].append("changed")
    assert first.tags == [] and Repo.json_schema()["properties"]["tags"]["default"] == []
    assert repr(first) == "repo_class.<locals>.Repo(name='x', branch='main', tags=[])"
    assert first != Repo(name="y") and first != {"name": "x"}
    with pytest.raises(AttributeError, match="Repo is read-only"):
        first.name = "y"


def test_a_class_without_input_id_or_with_a_bad_default_is_refused() -> None:
    with pytest.raises(SdkError, match="needs a class variable"):

        class NoId(SessionInput):
            name: str

    with pytest.raises(SdkError, match=r"Bad\.when: the default must be JSON data"):

        class Bad(SessionInput):
            input_id = "acme.bad"
            when: Any = object()


def test_nested_defaults_are_filled_in_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "default": {},
                "properties": {"b": {"type": "integer", "default": 2}, "c": True},
            },
            "d": {"type": "string"},
        },
    }
    cls = SessionInput.from_json_schema("acme.nested", schema)
    assert cls.from_value({}).to_dict() == {"a": {"b": 2}}
    assert cls.from_value({"a": {"b": 5}}).to_dict() == {"a": {"b": 5}}
    assert cls.__name__ == "AcmeNested"


def test_a_value_of_the_wrong_kind_is_refused_naming_the_consumer() -> None:
    Repo = repo_class()
    with pytest.raises(SessionInputError) as caught:
        Repo.from_value(["x"], consumer="hook h")
    assert str(caught.value) == (
        "hook h: session input 'acme.repo' must be a repo_class.<locals>.Repo or a mapping, "
        "got list"
    )
    assert caught.value.input_id == "acme.repo"
    other = SessionInput.from_json_schema("acme.other", {"type": "object"})
    with pytest.raises(SessionInputError, match=r"^expected session input 'acme\.repo', got"):
        Repo.from_value(other.from_value({}))


def test_a_misspelt_field_is_reported_as_such() -> None:
    Repo = repo_class()
    with pytest.raises(SessionInputError) as caught:
        Repo.from_value({"nmae": "x", "zzz": 1}, consumer="hook h")
    assert str(caught.value) == (
        "hook h: session input 'acme.repo' is invalid: "
        "unknown field 'nmae'; did you mean 'name'? (also unknown: 'zzz')"
    )


def test_a_secret_input_error_names_the_rule_never_the_value() -> None:
    cls = SessionInput.from_json_schema(
        "acme.key", {"type": "object", "properties": {"k": {"type": "integer"}}}, secret=True
    )
    with pytest.raises(SessionInputError) as caught:
        cls.from_value({"k": "hunter2"})
    assert str(caught.value) == (
        "session input 'acme.key' field 'k' is invalid: it fails the schema's 'type' rule "
        "(the value is secret and not shown)"
    )


def test_nul_is_refused_anywhere_and_a_leading_dash_where_asked() -> None:
    plain = SessionInput.from_json_schema("acme.v", {"type": "object"})
    no_dash = SessionInput.from_json_schema("acme.v", {"type": "object"}, no_leading_dash=True)
    with pytest.raises(SessionInputError) as caught:
        plain.from_value({"a": [{"b": "x\0y"}]})
    assert str(caught.value) == "session input 'acme.v' field 'a.0.b' contains a NUL character"
    assert plain.from_value({"a": "-x", "b": "+x"}).to_dict() == {"a": "-x", "b": "+x"}
    cases = [({"a": "-x"}, "a", "-"), ({"n": [1, -5]}, "n.1", "-"), ({"f": -0.5}, "f", "-")]
    cases += [({"a": "+!sh"}, "a", "+"), ({"n": ["x", "+5"]}, "n.1", "+")]
    for value, path, first in cases:
        with pytest.raises(SessionInputError) as caught:
            no_dash.from_value(value, consumer="hook h")
        assert str(caught.value).startswith(
            f"hook h: session input 'acme.v' field {path!r} starts with '{first}', which this "
            "input refuses (no_leading_option)"
        )
    assert no_dash.from_value({"a": "x-", "b": True, "c": "x+", "n": 5}).to_dict()["n"] == 5


def test_closest_finds_misspellings_and_shortenings_only() -> None:
    assert closest("reposiotry", ["repository", "branch"]) == "repository"
    assert closest("repo", ["branch", "repository"]) == "repository"
    assert closest("re", ["repository"]) is None  # too short to be a shortening
    assert closest("zzz", ["repository"]) is None


def test_secret_strings_come_from_secret_inputs_longest_first_three_characters_or_more() -> None:
    secret = SessionInput.from_json_schema("acme.s", {"type": "object"}, secret=True)
    public = SessionInput.from_json_schema("acme.p", {"type": "object"})
    values = [
        secret.from_value({"token": "abc", "short": "ab", "port": 8080, "on": True, "off": False}),
        public.from_value({"token": "public-value"}),
    ]
    found = secret_strings(values)
    assert {"abc", "8080", "true", "false"} <= set(found)
    assert "ab" not in found and "public-value" not in found
    assert [len(s) for s in found] == sorted((len(s) for s in found), reverse=True)


def echoed(text: str) -> set[str]:
    """The encoded forms of ``text`` and echo's newline, as the standard
    library writes them (review 26's B2b: ``echo "$S" | base64``)."""
    import base64

    data = text.encode("utf-8", "surrogatepass") + b"\n"
    b64, b32 = base64.b64encode(data).decode(), base64.b32encode(data).decode()
    urlsafe = base64.urlsafe_b64encode(data).decode()
    return {b64, b64.rstrip("="), urlsafe.rstrip("="), data.hex(), data.hex().upper()} | {
        b32,
        b32.rstrip("="),
    }


def test_the_forms_of_a_secret_with_a_single_quote_are_exactly_these() -> None:
    assert secret_forms("it's") == {
        "it's",
        "it'\"'\"'s",  # shlex.quote
        "it'\\''s",  # bash's single quoting
        "it\\'s",  # printf %q, $'...' and repr in '...'
        "it%27s",
        "aXQncw==",
        "aXQncw",
        "69742773",  # hex (xxd -p)
        "NF2CO4Y=",  # base32
        "NF2CO4Y",
        # the same of "it's\n", as echo "$S" | base64 encodes it (review 26's B2b)
        "aXQncwo=",
        "aXQncwo",
        "697427730a",
        "697427730A",
        "NF2CO4YK",
    }
    assert echoed("it's") <= secret_forms("it's")


SECRET = 'a b"$\\:~=~\té\u2028'


@pytest.mark.parametrize(
    "printed",
    [
        shlex.quote(SECRET),
        json.dumps(SECRET),
        json.dumps(SECRET, ensure_ascii=False),
        repr(SECRET),
        repr(SECRET + "'"),
        quote(SECRET, safe=""),
        "x=" + quote(SECRET, safe="") + "&y",
    ],
)
def test_what_python_prints_of_a_secret_is_masked(printed) -> None:
    masked = scrub(printed, sorted(secret_forms(SECRET), key=len, reverse=True))
    assert MASK in masked
    for piece in ("a b", "\\:~", "é", "%C3%A9"):
        assert piece not in masked


def test_the_ansi_c_form_escapes_by_name_then_octal_by_locale() -> None:
    text = "\a\b\t\n\v\f\r\x1b\\'\x01é\u2028~"
    named = "\\a\\b\\t\\n\\v\\f\\r\\E\\\\\\'\\001"
    assert _ansi_c(text, utf8=True) == named + "é\\342\\200\\250~"
    assert _ansi_c(text, utf8=False) == named + "\\303\\251\\342\\200\\250~"


def test_printf_q_escapes_a_tilde_after_colon_or_equals_only() -> None:
    assert "a\\:\\~b\\=\\~c~" not in secret_forms("a:~b=~c~")  # the colon is not escaped
    assert "a:\\~b=\\~c~" in secret_forms("a:~b=~c~")


def test_scrub_masks_every_occurrence_of_every_secret() -> None:
    assert scrub("tok and tok, key", ["tok", "key"]) == "*** and ***, ***"
    assert scrub("nothing", []) == "nothing"


def test_the_forms_of_a_secret_with_non_ascii_and_backslashed_characters_are_exactly_these():
    # base64 of this text holds "/": its URL-safe form differs, and so does each padding strip
    assert secret_forms('é?>/"$`') - echoed('é?>/"$`') == {
        'é?>/"$`',  # raw, shlex.quote, bash quoting, $'...' in UTF-8, repr in '...'
        'é?>/\\"\\$\\`',  # declare -p
        'é\\?\\>/\\"\\$\\`',  # printf %q
        '\\303\\251?>/"$`',  # $'...' in the C locale
        '\\u00e9?>/\\"$`',  # JSON
        'é?>/\\"$`',  # JSON with ensure_ascii=False
        'é?>/"$`\\',  # repr with both quotes around (the \\ of an escaped ' after it)
        "%C3%A9%3F%3E%2F%22%24%60",  # URL-encoded, "/" included
        "%c3%a9%3f%3e%2f%22%24%60",  # and with lower-case hex
        "w6k/Pi8iJGA=",
        "w6k/Pi8iJGA",
        "w6k_Pi8iJGA",
        "c3a93f3e2f222460",
        "C3A93F3E2F222460",
        "YOUT6PRPEISGA===",
        "YOUT6PRPEISGA",
    }


def test_an_inherited_input_id_names_the_subclass_too() -> None:
    Repo = repo_class()

    class Fork(Repo):
        extra: int = 0

    assert Fork.input_id == "acme.repo"
    assert Fork.json_schema()["title"] == "acme.repo"
    assert Fork.__field_names__ == ("name", "branch", "tags", "extra")


def test_a_class_that_gives_its_schema_keeps_it() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}

    class Given(SessionInput):
        input_id = "acme.given"
        __schema__ = schema
        __field_names__ = ("x",)
        y: str  # not read: the schema is given

    assert Given.json_schema() == schema
    assert Given.from_value({"x": 1}).x == 1


def test_a_derived_schema_is_a_2020_12_object_schema() -> None:
    schema = repo_class().json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"


def test_class_variables_and_input_id_are_not_fields_whatever_their_order() -> None:
    class Marked(SessionInput):
        input_id: str = "acme.marked"
        first: ClassVar = 1  # a bare ClassVar, before a field
        name: str

    assert Marked.__field_names__ == ("name",)
    assert Marked.json_schema()["required"] == ["name"]


def test_an_unresolvable_annotation_names_the_class() -> None:
    with pytest.raises(SdkError, match=r"SessionInput .*Broken: cannot resolve a type: .*Missing"):

        class Broken(SessionInput):
            input_id = "acme.broken"
            field: Missing  # the name is missing on purpose


def test_a_mutable_default_is_copied_into_the_schema() -> None:
    class Nested(SessionInput):
        input_id = "acme.nested"
        rows: list[list[str]] = [["a"]]  # mutated below on purpose

    Nested.rows[0].append("changed")
    assert Nested.json_schema()["properties"]["rows"]["default"] == [["a"]]
    assert Nested.from_value({}).rows == [["a"]]


def test_a_one_item_tuple_is_an_array_of_that_item() -> None:
    assert annotation_schema(tuple[int], where="X.f") == {
        "type": "array",
        "items": {"type": "integer"},
    }


@pytest.mark.parametrize(
    "annotation",
    [Annotated[bytes, "doc"], int | bytes, tuple[int, bytes], list[bytes], dict[str, bytes]],
)
def test_a_nested_unsupported_type_names_the_field(annotation) -> None:
    with pytest.raises(SdkError) as caught:
        annotation_schema(annotation, where="X.f")
    assert str(caught.value) == (
        "X.f: unsupported type <class 'bytes'>; use str, int, float, bool, "
        "list, dict[str, ...], Literal, Optional or a union of those"
    )


def misspelling(cls: type[SessionInput], value: dict) -> str:
    with pytest.raises(SessionInputError) as caught:
        cls.from_value(value)
    return str(caught.value)


def test_a_misspelt_optional_field_is_named_by_additional_properties() -> None:
    Repo = repo_class()
    assert misspelling(Repo, {"name": "x", "brnach": "y"}) == (
        "session input 'acme.repo' is invalid: unknown field 'brnach'; did you mean 'branch'?"
    )
    assert misspelling(Repo, {"name": "x", "brnach": "y", "zz": 1, "yy": 2}) == (
        "session input 'acme.repo' is invalid: unknown field 'brnach'; did you mean 'branch'? "
        "(also unknown: 'zz', 'yy')"
    )


def test_a_misspelt_required_field_is_named_where_extra_keys_are_allowed() -> None:
    schema = {"type": "object", "properties": {"repository": {}}, "required": ["repository"]}
    cls = SessionInput.from_json_schema("acme.open", schema)
    assert misspelling(cls, {"repo": "x"}) == (
        "session input 'acme.open' is invalid: unknown field 'repo'; did you mean 'repository'?"
    )


def test_keys_allowed_by_pattern_properties_are_not_misspellings() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "patternProperties": {"^x": {}},
        "additionalProperties": False,
    }
    cls = SessionInput.from_json_schema("acme.pattern", schema)
    assert misspelling(cls, {"xname": 1, "nmae": "a"}) == (
        "session input 'acme.pattern' is invalid: unknown field 'nmae'; did you mean 'name'?"
    )


def test_a_class_from_a_json_schema_keeps_its_own_copy_and_its_flags() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    cls = SessionInput.from_json_schema("acme.my-repo.v2", schema)
    schema["properties"]["a"]["type"] = "string"  # the caller's dict, changed afterwards
    assert cls.json_schema()["properties"]["a"] == {"type": "integer"}
    assert cls.__name__ == "AcmeMyRepoV2"
    assert cls.__module__ == "runner.engine.inputs"
    assert cls.__from_schema__ is True
    assert (cls.__optional__, cls.__secret__, cls.__no_leading_dash__) == (False, False, False)
    optional = SessionInput.from_json_schema("acme.o", schema, optional=True)
    assert optional.__optional__ is True


def test_a_false_subschema_refuses_an_object_cleanly() -> None:
    cls = SessionInput.from_json_schema("acme.no", {"type": "object", "properties": {"a": False}})
    # (a SessionInputError, not an AttributeError from reading the boolean schema)
    assert misspelling(cls, {"a": {}}).startswith("session input 'acme.no' ")


def test_a_secret_with_undecodable_bytes_gets_its_forms_without_a_crash() -> None:
    """A ``from_env`` secret whose bytes are not UTF-8 reaches Python with lone
    surrogates; computing its scrub forms used to raise UnicodeEncodeError at
    session start (URL-quoting the text instead of its bytes)."""
    from runner.core.redaction import secret_forms

    forms = secret_forms("tok\udcffen")
    assert "tok%FFen" in forms
    assert "tok\udcffen" in forms


# --- found by the third run (session 5): messages without a consumer, copies, hashes ---


def refusal(build: Any) -> SessionInputError:
    with pytest.raises(SessionInputError) as caught:
        build()
    return caught.value


def test_each_refusal_reads_exactly_with_and_without_a_consumer_and_names_its_input() -> None:
    Repo = repo_class()
    other = SessionInput.from_json_schema("acme.other", {"type": "object"}).from_value({})
    plain = SessionInput.from_json_schema("acme.v", {"type": "object"})
    no_dash = SessionInput.from_json_schema("acme.v", {"type": "object"}, no_leading_dash=True)
    mismatch = "expected session input 'acme.repo', got AcmeOther with input_id 'acme.other'"
    dash = (
        "session input 'acme.v' field 'a' starts with '-', which this input refuses "
        "(no_leading_option): a command could read it as an option"
    )
    cases = [
        (lambda: Repo.from_value(["x"]), "acme.repo", "session input 'acme.repo' must be a "
         "repo_class.<locals>.Repo or a mapping, got list"),
        (lambda: Repo.from_value(other), "acme.repo", mismatch),
        (lambda: Repo.from_value(other, consumer="hook h"), "acme.repo", "hook h: " + mismatch),
        (lambda: plain.from_value({"a": "x\0"}), "acme.v",
         "session input 'acme.v' field 'a' contains a NUL character"),
        (lambda: plain.from_value({"a": "x\0"}, consumer="hook h"), "acme.v",
         "hook h: session input 'acme.v' field 'a' contains a NUL character"),
        (lambda: no_dash.from_value({"a": "-x"}), "acme.v", dash),
        (lambda: no_dash.from_value({"a": "-x"}, consumer="hook h"), "acme.v", "hook h: " + dash),
    ]  # fmt: skip
    for build, input_id, message in cases:
        error = refusal(build)
        assert (str(error), error.input_id) == (message, input_id)


def test_equal_inputs_hash_alike_whatever_their_key_order_and_others_apart() -> None:
    cls = SessionInput.from_json_schema("acme.h", {"type": "object"})
    first, second = cls.from_value({"x": 1, "y": 2}), cls.from_value({"y": 2, "x": 1})
    assert first == second and hash(first) == hash(second) and len({first, second}) == 1
    assert len({hash(cls.from_value({"n": i})) for i in range(50)}) == 50
    twin = SessionInput.from_json_schema("acme.h2", {"type": "object"}).from_value({"x": 1, "y": 2})
    assert hash(twin) != hash(first)  # the same data under another input id


def test_building_an_input_changes_neither_the_callers_value_nor_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "default": {"inner": {}},
                "properties": {"inner": {"type": "object", "properties": {"b": {"default": 2}}}},
            }
        },
    }
    cls = SessionInput.from_json_schema("acme.d", schema)
    given = {"a": {"inner": {}}}
    assert cls.from_value(given).to_dict() == {"a": {"inner": {"b": 2}}}
    assert given == {"a": {"inner": {}}}  # the caller's nested dicts were not filled in
    assert cls.from_value({}).to_dict() == {"a": {"inner": {"b": 2}}}
    assert cls.json_schema()["properties"]["a"]["default"] == {"inner": {}}  # nor the default
    returned = cls.json_schema()
    returned["properties"]["a"]["type"] = "string"
    assert cls.json_schema()["properties"]["a"]["type"] == "object"  # a deep copy each time


def test_a_boolean_subschema_does_not_stop_the_defaults_after_it() -> None:
    cls = SessionInput.from_json_schema(
        "acme.b", {"type": "object", "properties": {"x": True, "y": {"default": 5}}}
    )
    assert cls.from_value({}).to_dict() == {"y": 5}


def test_a_misspelt_field_is_reported_before_another_fields_error() -> None:
    cls = SessionInput.from_json_schema(
        "acme.m",
        {
            "type": "object",
            "properties": {"repository": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["count"],
            "additionalProperties": False,
        },
    )
    # jsonschema's best_match alone would report the missing 'count'.
    assert misspelling(cls, {"repo": "x"}) == (
        "session input 'acme.m' is invalid: unknown field 'repo'; did you mean 'repository'?"
    )


def test_only_additional_properties_false_makes_a_key_a_misspelling() -> None:
    """An object-level ``const: false`` also has the value False: not a misspelling."""
    cls = SessionInput.from_json_schema(
        "acme.c", {"type": "object", "properties": {"repository": {}}, "const": False}
    )
    assert misspelling(cls, {"repo": 1}) == "session input 'acme.c' is invalid: False was expected"


def test_a_three_letter_shortening_is_close_enough() -> None:
    assert closest("rep", ["repository"]) == "repository"  # difflib alone says no


def test_the_forms_of_these_secrets_are_exactly_these() -> None:
    """declare -p backslashes only \\ " $ `; $'...' comes with UTF-8 kept and as
    octal; a text that is not even surrogate-escaped is URL-quoted from its
    UTF-8 bytes; an unpadded base64 form is the base64 itself."""
    assert secret_forms("aXb$") - echoed("aXb$") == {
        "aXb$",
        "aXb\\$",
        "aXb%24",
        "YVhiJA==",
        "YVhiJA",
        "61586224",
        "MFMGEJA=",
        "MFMGEJA",
    }
    assert secret_forms("é\x01z") - echoed("é\x01z") == {
        "é\x01z",
        "é\\001z",  # $'...' in a UTF-8 locale
        "\\303\\251\\001z",  # $'...' in the C locale
        "é\\u0001z",
        "\\u00e9\\u0001z",
        "é\\x01z",
        "%C3%A9%01z",
        "%c3%a9%01z",
        "w6kBeg==",
        "w6kBeg",
        "c3a9017a",
        "C3A9017A",
        "YOUQC6Q=",
        "YOUQC6Q",
    }
    assert secret_forms("ab\ud800cd") - echoed("ab\ud800cd") == {
        "ab\ud800cd",
        "ab\\355\\240\\200cd",
        "ab\\ud800cd",
        "ab%ED%A0%80cd",
        "ab%ed%a0%80cd",
        "YWLtoIBjZA==",
        "YWLtoIBjZA",
        "6162eda0806364",
        "6162EDA0806364",
        "MFRO3IEAMNSA====",
        "MFRO3IEAMNSA",
    }
    # no form with its last X stripped
    assert secret_forms("abW") - echoed("abW") == {"abW", "YWJX", "616257", "MFRFO===", "MFRFO"}


def test_an_instance_of_another_class_with_the_same_input_id_is_taken_by_its_value() -> None:
    """A YAML-declared input and a Python class for it are two classes of one input."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    first = SessionInput.from_json_schema("acme.same", schema)
    second = SessionInput.from_json_schema("acme.same", schema, name="Other")
    taken = first.from_value(second.from_value({"n": 7}))
    assert type(taken) is first and taken.to_dict() == {"n": 7}
