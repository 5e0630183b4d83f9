"""Secrets read from the host, attacked through direct calls (found by mutation testing).

The CLI tests of secrets run ``runner`` in a subprocess, which mutmut cannot
see; these call ``secrets_input_class`` in-process, with each way a secret's
source can be missing, empty, too big, not a file, or outside its folder.
"""

from __future__ import annotations

import os

import pytest

from runner.config.secrets import MAX_SECRET_BYTES, SECRETS_INPUT_ID, secrets_input_class
from runner.core.errors import SessionInputError


def provide(specs, config_dir):
    return secrets_input_class(specs, config_dir).__provide__()


def refusal(specs, config_dir) -> SessionInputError:
    with pytest.raises(SessionInputError) as caught:
        provide(specs, config_dir)
    assert caught.value.input_id == SECRETS_INPUT_ID
    return caught.value


def test_the_class_is_a_secret_input_with_one_string_field_per_secret(tmp_path) -> None:
    cls = secrets_input_class(
        {"token": {"from_env": "T"}, "key": {"from_file": "k", "required": False}}, tmp_path
    )
    assert cls.input_id == SECRETS_INPUT_ID == "runner.secrets"
    assert cls.__name__ == "Secrets"
    assert cls.__secret__ is True
    schema = cls.json_schema()
    assert schema["properties"] == {"token": {"type": "string"}, "key": {"type": "string"}}
    assert schema["required"] == ["token"]  # "required" defaults to true
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


def test_a_secret_from_the_environment_is_read_at_provide_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MH_TOKEN", "s3cr3t value\n")
    assert provide({"token": {"from_env": "MH_TOKEN"}}, tmp_path) == {"token": "s3cr3t value\n"}


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_required_env_secret_that_is_unset_or_empty_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.delenv("MH_TOKEN", raising=False)
    if value is not None:
        monkeypatch.setenv("MH_TOKEN", value)
    error = refusal({"token": {"from_env": "MH_TOKEN"}}, tmp_path)
    assert str(error) == (
        "secret 'token' is required but the environment variable MH_TOKEN is not set"
    )


def test_an_optional_secret_that_is_missing_is_left_out(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MH_TOKEN", raising=False)
    monkeypatch.setenv("MH_OTHER", "x")
    specs = {
        "token": {"from_env": "MH_TOKEN", "required": False},
        "file": {"from_file": "absent", "required": False},
        "other": {"from_env": "MH_OTHER"},
    }
    assert provide(specs, tmp_path) == {"other": "x"}


def test_a_secret_file_loses_one_trailing_newline_only(tmp_path) -> None:
    (tmp_path / "one").write_text("tok\n")
    (tmp_path / "two").write_text("tok\n\n")
    (tmp_path / "none").write_text("tok")
    specs = {name: {"from_file": name} for name in ("one", "two", "none")}
    assert provide(specs, tmp_path) == {"one": "tok", "two": "tok\n", "none": "tok"}


def test_a_secret_file_is_read_relative_to_the_config_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k").write_text("folder")
    monkeypatch.chdir(tmp_path / "keys")  # a path relative to the cwd would find nothing
    assert provide({"k": {"from_file": "keys/k"}}, tmp_path) == {"k": "folder"}


def test_a_missing_required_secret_file_is_refused_by_name(tmp_path) -> None:
    error = refusal({"key": {"from_file": "absent.txt"}}, tmp_path)
    assert str(error) == "secret 'key' is required but the file absent.txt is not set"


def test_a_secret_file_of_exactly_the_limit_is_read_one_byte_more_is_refused(tmp_path) -> None:
    (tmp_path / "full").write_bytes(b"a" * MAX_SECRET_BYTES)
    (tmp_path / "over").write_bytes(b"a" * (MAX_SECRET_BYTES + 1))
    assert MAX_SECRET_BYTES == 1_000_000  # the documented 1 MB
    assert provide({"s": {"from_file": "full"}}, tmp_path) == {"s": "a" * MAX_SECRET_BYTES}
    error = refusal({"s": {"from_file": "over"}}, tmp_path)
    assert str(error).startswith("secret 's': cannot read over: ")
    assert "larger than 1000000 bytes" in str(error)


def test_a_secret_file_that_is_a_fifo_is_refused_without_waiting(tmp_path) -> None:
    os.mkfifo(tmp_path / "pipe")
    error = refusal({"s": {"from_file": "pipe"}}, tmp_path)
    assert "not a regular file" in str(error)


@pytest.mark.parametrize("path", ["../outside", "/etc/hostname", "~/x", "a/../../b"])
def test_a_secret_file_outside_the_folder_is_refused(tmp_path, path) -> None:
    error = refusal({"s": {"from_file": path}}, tmp_path)
    assert str(error).startswith(f"secret 's': cannot read {path}: secret 's': ")


def test_a_secret_file_that_is_a_symlink_out_of_the_folder_is_refused(tmp_path) -> None:
    (tmp_path / "outside").write_text("host secret")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "link").symlink_to(tmp_path / "outside")
    error = refusal({"s": {"from_file": "link"}}, config_dir)
    assert "leads outside" in str(error)
    assert "host secret" not in str(error)


def test_a_secret_file_that_is_not_utf8_is_kept_as_its_bytes(tmp_path) -> None:
    """A binary key is read as it is (issue 25, item 8): its bytes that are not
    UTF-8 are surrogate-escaped, as Python reads such an environment variable,
    so a step gets the original bytes back and scrubbing can match them.  It
    used to be refused with a UnicodeDecodeError."""
    (tmp_path / "bin").write_bytes(b"k\xff\xfe-key\x80\n")
    (value,) = provide({"s": {"from_file": "bin"}}, tmp_path).values()
    assert value == "k\udcff\udcfe-key\udc80"  # one trailing newline dropped, as for text
    assert value.encode("utf-8", "surrogateescape") == b"k\xff\xfe-key\x80"


def test_a_refused_secret_file_hides_the_error_behind_it(tmp_path) -> None:
    (tmp_path / "folder").mkdir()
    error = refusal({"s": {"from_file": "folder"}}, tmp_path)
    assert str(error).startswith("secret 's': cannot read folder: ")
    assert error.__cause__ is None and error.__suppress_context__  # `from None`
