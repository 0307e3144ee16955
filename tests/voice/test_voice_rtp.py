"""From a transport-decrypted RTP payload to Opus: RTP padding (RFC 3550) and the DAVE decrypt hook.

A real DAVE session needs Discord's MLS group, which cannot be had offline; ``DaveSessionStandIn`` takes
the place of the third-party ``davey.DaveSession`` only, so the call we make on it can be checked.
"""

from __future__ import annotations

import davey

from memory.clock import FakeClock
from voice.rtp import DAVE_MARKER, PaddingError, SenderWait, dave_decrypt, open_frame, strip_padding

OPUS = b"\x78\x01\x02\x03opus-frame"


class DaveSessionStandIn:
    """The slice of ``davey.DaveSession`` the hook uses: ``ready`` and ``decrypt``, with a call log."""

    def __init__(self, ready: bool = True, fail: bool = False) -> None:
        self.ready = ready
        self.fail = fail
        self.calls: list[tuple[int, object, bytes]] = []

    def decrypt(self, user_id: int, media_type: object, packet: bytes) -> bytes:
        self.calls.append((user_id, media_type, packet))
        if self.fail:
            raise ValueError("DecryptionFailed(NoValidCryptorFound)")
        return b"decrypted:" + packet[: -len(DAVE_MARKER)]


def dave_frame(body: bytes = b"ciphertext") -> bytes:
    return body + b"\x05" + DAVE_MARKER  # ...supplemental size, then the marker, as DAVE frames end


def test_padding_is_removed_when_the_padding_bit_is_set():
    assert strip_padding(OPUS + b"\0\0\x03", padded=True) == OPUS
    assert strip_padding(OPUS + b"\x01", padded=True) == OPUS


def test_payload_is_untouched_when_the_padding_bit_is_clear():
    assert strip_padding(OPUS + b"\x03", padded=False) == OPUS + b"\x03"


def test_a_padding_count_larger_than_the_payload_is_refused():
    for bad in (b"", b"\x00", b"ab\x09"):
        try:
            strip_padding(bad, padded=True)
        except PaddingError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def test_frames_pass_through_when_there_is_no_dave_session():
    assert dave_decrypt(dave_frame(), None, 42) == dave_frame()


def test_frames_pass_through_while_the_dave_session_is_not_ready():
    session = DaveSessionStandIn(ready=False)
    assert dave_decrypt(dave_frame(), session, 42) == dave_frame() and session.calls == []


def test_unencrypted_frames_pass_through_a_ready_dave_session():
    session = DaveSessionStandIn()
    assert dave_decrypt(OPUS, session, 42) == OPUS
    assert dave_decrypt(b"\xf8\xff\xfe", session, 42) == b"\xf8\xff\xfe"  # Opus silence
    assert session.calls == []


def test_a_dave_frame_is_decrypted_for_its_sender_as_audio():
    session = DaveSessionStandIn()
    assert dave_decrypt(dave_frame(), session, 42) == b"decrypted:ciphertext\x05"
    assert session.calls == [(42, davey.MediaType.audio, dave_frame())]


def test_a_dave_frame_from_an_unknown_sender_cannot_be_opened_yet():
    session = DaveSessionStandIn()
    assert dave_decrypt(dave_frame(), session, None) is None and session.calls == []


def test_a_dave_frame_that_fails_to_decrypt_is_dropped_not_raised():
    assert dave_decrypt(dave_frame(), DaveSessionStandIn(fail=True), 42) is None


def test_padding_is_stripped_before_dave_sees_the_frame():
    session = DaveSessionStandIn()
    assert (
        open_frame(dave_frame() + b"\0\0\0\x04", padded=True, dave_session=session, user_id=7)
        is not None
    )
    assert session.calls[0][2] == dave_frame()


def test_a_badly_padded_packet_is_treated_as_lost():
    assert open_frame(b"ab\x09", padded=True, dave_session=None, user_id=7) is None


def test_frames_held_for_a_sender_come_back_in_order_once_named():

    wait = SenderWait(clock=FakeClock(0.0))
    for n in range(3):
        wait.hold(7, dave_frame(bytes([n])), padded=False)
    assert wait.waiting() == [7] and [h.payload[0] for h in wait.release(7)] == [0, 1, 2]
    assert wait.waiting() == [] and wait.release(7) == []


def test_held_frames_are_bounded_in_time_bytes_and_streams():

    clock = FakeClock(0.0)
    wait = SenderWait(max_age_s=5.0, max_bytes=100, max_streams=2, clock=clock)
    wait.hold(1, b"a" * 40, padded=False)
    clock.advance(6.0)
    wait.hold(1, b"b" * 40, padded=False)
    wait.hold(1, b"c" * 40, padded=False)
    wait.hold(1, b"d" * 40, padded=False)  # 120 bytes: the oldest goes
    # "a" too old, "b" over the byte bound
    assert [h.payload[:1] for h in wait.release(1)] == [
        b"c",
        b"d",
    ]
    for ssrc in (1, 2, 3):  # a flood of streams nobody names
        wait.hold(ssrc, b"x", padded=False)
    assert wait.waiting() == [2, 3] and wait.dropped == 3
