"""SessionInput: schemas derived from annotations, validated with jsonschema."""

from __future__ import annotations

from typing import Literal

import pytest

import runner as agents


class Job(agents.SessionInput):
    input_id = "ci.job"

    name: str
    attempts: int = 1
    ratio: float = 0.5
    dry_run: bool = False
    tags: list[str] = []
    stage: Literal["build", "test"] = "test"
    owner: str | None = None


def test_schema_is_derived_from_annotations() -> None:
    schema = Job.json_schema()
    assert schema["title"] == "ci.job"
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["attempts"] == {"type": "integer", "default": 1}
    assert schema["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "default": [],
    }
    assert schema["properties"]["stage"] == {"enum": ["build", "test"], "default": "test"}
    assert schema["properties"]["owner"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_defaults_are_applied_and_not_shared() -> None:
    first, second = Job(name="a"), Job(name="b")
    assert first.to_dict() == {
        "name": "a",
        "attempts": 1,
        "ratio": 0.5,
        "dry_run": False,
        "tags": [],
        "stage": "test",
        "owner": None,
    }
    first.tags.append("x")
    assert second.tags == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "'name' is a required property"),
        ({"name": 3}, "field 'name' is invalid: 3 is not of type 'string'"),
        ({"name": "a", "attempts": "2"}, "field 'attempts'"),
        ({"name": "a", "attempts": True}, "field 'attempts'"),
        ({"name": "a", "stage": "deploy"}, "field 'stage'"),
        ({"name": "a", "tags": ["ok", 1]}, "field 'tags.1'"),
        ({"name": "a", "colour": "red"}, "Additional properties are not allowed"),
    ],
)
def test_invalid_values_name_the_input_and_field(fields: dict, message: str) -> None:
    with pytest.raises(agents.SessionInputError, match="ci.job") as info:
        Job(**fields)
    assert message in str(info.value)
    assert info.value.input_id == "ci.job"


def test_instances_are_read_only_and_compare_by_value() -> None:
    job = Job(name="a")
    with pytest.raises(AttributeError):
        job.name = "b"
    assert job == Job.from_value({"name": "a"})
    assert hash(job) == hash(Job(name="a"))
    assert "Job(name='a'" in repr(job)


def test_missing_input_id_is_an_sdk_error() -> None:
    with pytest.raises(agents.SdkError, match="needs a class variable input_id"):

        class NoId(agents.SessionInput):
            name: str


def test_unsupported_field_type_is_an_sdk_error() -> None:
    with pytest.raises(agents.SdkError, match=r"Bad\.when: unsupported type"):

        class Bad(agents.SessionInput):
            input_id = "x.bad"
            when: object


def test_from_value_rejects_a_non_mapping() -> None:
    with pytest.raises(agents.SessionInputError, match="must be a Job or a mapping, got list"):
        Job.from_value(["a"], consumer="sandbox hook H.on_create")


def test_no_leading_dash_refuses_option_like_values() -> None:
    Repo = agents.SessionInput.from_json_schema(
        "acme.repository",
        {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}},
        no_leading_dash=True,
    )
    assert Repo.from_value({"names": ["ok", "a-b"]}).names == ["ok", "a-b"]
    with pytest.raises(agents.SessionInputError, match=r"field 'names\.1' starts with '-'"):
        Repo.from_value({"names": ["ok", "--upload-pack=evil"]})


def test_no_leading_dash_counts_numbers_as_the_text_a_command_receives() -> None:
    Job = agents.SessionInput.from_json_schema(
        "ci.job",
        {
            "type": "object",
            "properties": {
                "depth": {"type": "integer"},
                "ratio": {"type": "number"},
                "fast": {"type": "boolean"},
            },
        },
        no_leading_dash=True,
    )
    assert Job.from_value({"depth": 5, "ratio": 0.5, "fast": False}).depth == 5
    for field, value in (("depth", -5), ("ratio", -0.5), ("ratio", -1e-09)):
        with pytest.raises(agents.SessionInputError, match=rf"field '{field}' starts with '-'"):
            Job.from_value({field: value})
