"""The host's ``Capped`` (``sandboxes/docker/exec``) and the in-container
helper's (``sandboxes/helpers/exec_helper``) cap output the same way.

The helper runs inside the container and the library never imports it, so
the host keeps its own copy; any stream of chunks and any cap must give the
same bytes from both.
"""

from hypothesis import given
from hypothesis import strategies as st

from runner.sandboxes.docker.exec import Capped as HostCapped
from runner.sandboxes.helpers.exec_helper import Capped as HelperCapped


@given(
    cap=st.integers(min_value=0, max_value=64), chunks=st.lists(st.binary(max_size=40), max_size=8)
)
def test_the_host_and_the_helper_cap_a_stream_alike(cap: int, chunks: list[bytes]) -> None:
    host, helper = HostCapped(cap), HelperCapped(cap)
    for chunk in chunks:
        host.add(chunk)
        helper.add(chunk)
    assert host.value() == helper.value()
    assert host.total == helper.total == sum(map(len, chunks))


def test_a_long_stream_keeps_its_head_and_tail_and_says_what_it_left_out() -> None:
    capped = HostCapped(8)
    capped.add(b"0123456789abcdef")
    assert capped.value() == b"0123\n[... 8 bytes omitted ...]\ncdef"
