"""The journal of ``ctx.sandbox`` calls and model replies (``runner serve``),
on a real local sandbox and a real SQLite journal: what is recorded, what a
second run gets back, and what is never written (a secret, a huge file)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import runner
from runner.core.events import add_secrets
from runner.models.protocol import ModelReply, ToolCall
from runner.serve.journal import JournaledModel, JournaledSandbox, ReplayMismatchError
from runner.serve.store.base import TURN, NewSession
from runner.serve.store.sqlite import SqliteStore

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::runner.sandboxes.local.DangerousLocalWarning"),
]

SECRET = "hunter2-not-for-the-journal"


@pytest.fixture
async def sandbox(tmp_path: Path):
    environment = runner.DangerousLocalSandbox(temp_dir=tmp_path / "sandboxes")
    (tmp_path / "sandboxes").mkdir()
    created = await environment.create(session_id="sess_j", expires_at=None)
    yield created
    await created.delete()


@pytest.fixture
def store(tmp_path: Path):
    opened = SqliteStore(tmp_path / "journal.db")
    yield opened
    opened.close()


def journal(store: SqliteStore, sandbox) -> JournaledSandbox:
    return JournaledSandbox(sandbox, store, "sess_j", hook=0, point="on_create:sandbox", scope="h")


def stored_text(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "journal.db") as db:
        return json.dumps(db.execute("SELECT * FROM steps").fetchall())


async def test_a_second_run_gets_the_recorded_results_without_running_the_calls(
    store, sandbox, tmp_path: Path
) -> None:
    first = journal(store, sandbox)
    ran = await first.execute("echo ran >> count; echo out; echo err >&2; exit 3")
    await first.write_file("note.txt", "first")
    assert await first.read_file("note.txt") == b"first"
    target = tmp_path / "saved.txt"
    assert await first.save_file("note.txt", target) == 5

    # What a second run sees, after the sandbox changed underneath.
    await sandbox.write_file("note.txt", "changed")
    second = journal(store, sandbox)
    again = await second.execute("echo ran >> count; echo out; echo err >&2; exit 3")
    assert (again.exit_code, again.stdout, again.stderr) == (3, "out\n", "err\n")
    assert again == ran
    await second.write_file("note.txt", "first")  # recorded: not written again
    assert await second.read_file("note.txt") == b"first"  # the recorded bytes
    assert await second.save_file("note.txt", target) == 5
    assert (await sandbox.read_file("count")) == b"ran\n"  # the command ran once
    assert (await sandbox.read_file("note.txt")) == b"changed"

    # A third call that never ran before runs live.
    assert (await second.execute("cat note.txt")).stdout == "changed"


async def test_a_call_that_differs_from_the_recorded_one_stops_the_replay(store, sandbox) -> None:
    await journal(store, sandbox).execute("echo one")
    with pytest.raises(ReplayMismatchError, match=r"sandbox call 1 was execute\('echo one'\)"):
        await journal(store, sandbox).execute("echo two")
    with pytest.raises(ReplayMismatchError, match="read_file"):
        await journal(store, sandbox).read_file("one")
    # The same command with another environment or folder is another call.
    with pytest.raises(ReplayMismatchError):
        await journal(store, sandbox).execute("echo one", env={"X": "1"})


async def test_secrets_never_reach_the_journal(store, sandbox, tmp_path: Path) -> None:
    add_secrets([SECRET])
    first = journal(store, sandbox)
    result = await first.execute(f"echo {SECRET}")
    assert result.stdout == f"{SECRET}\n"  # the hook itself sees the value
    await first.write_file("token", SECRET)
    assert await first.read_file("token") == SECRET.encode()
    text = stored_text(tmp_path)
    assert SECRET not in text
    import base64

    assert base64.b64encode(SECRET.encode()).decode() not in text
    # A replay gets what was recorded: the secret scrubbed.
    second = journal(store, sandbox)
    assert (await second.execute(f"echo {SECRET}")).stdout == "***\n"
    await second.write_file("token", SECRET)
    assert await second.read_file("token") == b"***"


async def test_a_huge_read_and_a_failed_call_are_not_recorded(store, sandbox) -> None:
    big = b"x" * ((1 << 20) + 1)
    await sandbox.write_file("big", big)
    first = journal(store, sandbox)
    assert await first.read_file("big") == big
    with pytest.raises(FileNotFoundError):
        await first.read_file("missing")
    await sandbox.write_file("big", b"smaller now")
    await sandbox.write_file("missing", b"there now")
    second = journal(store, sandbox)
    assert await second.read_file("big") == b"smaller now"  # read again
    assert await second.read_file("missing") == b"there now"  # run again


class Scripted:
    def __init__(self, *replies: ModelReply) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def complete(self, messages, tools) -> ModelReply:
        self.calls += 1
        return self.replies.pop(0)


async def test_model_replies_are_recorded_scrubbed_and_replayed(store, tmp_path: Path) -> None:
    add_secrets([SECRET])
    reply = ModelReply(
        text=f"the key is {SECRET}",
        tool_calls=(ToolCall("call00001", "bash", json.dumps({"command": "ls"})),),
        finish_reason="tool_calls",
    )
    model = Scripted(reply, ModelReply(text="second"))
    first = JournaledModel(model, store, "sess_j")
    assert await first.complete([], []) == reply
    replay = JournaledModel(Scripted(), store, "sess_j")
    again = await replay.complete([], [])
    assert again.tool_calls == reply.tool_calls
    assert again.finish_reason == "tool_calls"
    assert again.text == "the key is ***"
    assert SECRET not in stored_text(tmp_path)
    # The turn's end drops its journal, with the conversation, in one go.
    await store.create_session_async(
        NewSession(
            id="sess_j",
            agent="a",
            inputs={},
            idempotency_key=None,
            fingerprint="f",
            file_hash="h",
            backend="local",
        )
    )
    store.update("sess_j", status="running")
    store.end_turn("sess_j", conversation=[{"role": "user", "content": "hi"}], result={"turn": 1})
    assert store.finished_step("sess_j", TURN, "turn:model", 0) is None
    row = store.session("sess_j")
    assert (row.status, row.conversation, row.result) == (
        "waiting",
        [{"role": "user", "content": "hi"}],
        {"turn": 1},
    )
