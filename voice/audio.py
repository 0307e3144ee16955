"""Raw audio as plain bytes: signed 16-bit little-endian PCM, and the few conversions voice needs.

Three formats meet here::

    Discord      48 kHz stereo, 20 ms frames of 3,840 bytes     (what Opus decodes to and encodes from)
    listening    16 kHz mono                                     (what webrtcvad and Whisper want)
    speaking     any rate, mono                                  (what a TTS engine hands back)

Everything is numpy on whole buffers: a 20 ms frame costs microseconds, so the receive thread can
convert every packet as it arrives.
"""

from __future__ import annotations

import io
import struct
import wave

import numpy as np

DISCORD_RATE = 48_000
LISTEN_RATE = 16_000
FRAME_MS = 20
DISCORD_FRAME_BYTES = DISCORD_RATE * FRAME_MS // 1000 * 2 * 2  # 960 samples x 2 channels x 2 bytes


class AudioFormatError(ValueError):
    """Bytes that do not hold the audio they claim to (a broken WAV, an odd-length PCM buffer)."""


def samples(pcm16: bytes) -> np.ndarray:
    """The int16 samples of a PCM buffer (a trailing odd byte, which no encoder writes, is dropped)."""
    return np.frombuffer(pcm16[: len(pcm16) // 2 * 2], dtype="<i2")


SILENT_PEAK = 64  # no sample beyond +-64 of 32767 (-54 dBFS): no sound (Discord's silence frames decode to zeros)


def is_silent(pcm16: bytes) -> bool:
    """No sound at all in this audio (an empty buffer is silent)."""
    return int(np.abs(samples(pcm16).astype(np.int32)).max(initial=0)) <= SILENT_PEAK


def discord_to_listen(pcm48_stereo: bytes) -> bytes:
    """48 kHz stereo -> 16 kHz mono: average the channels, then average each run of three samples.

    A three-sample mean is a crude low-pass, but speech energy sits far below the 8 kHz it folds at,
    and both webrtcvad and Whisper were measured to work on it; it costs ~10 us per 20 ms frame.
    """
    stereo = samples(pcm48_stereo)
    mono = stereo[: len(stereo) // 2 * 2].reshape(-1, 2).mean(axis=1)
    triples = mono[: len(mono) // 3 * 3].reshape(-1, 3).mean(axis=1)
    return np.round(triples).astype("<i2").tobytes()


def resample(pcm16: bytes, rate: int, target: int) -> bytes:
    """Mono PCM from ``rate`` to ``target`` Hz by linear interpolation (speech in, speech out)."""
    if rate == target:
        return pcm16
    source = samples(pcm16).astype(np.float32)
    if source.size == 0:
        return b""
    count = int(round(source.size * target / rate))
    positions = np.arange(count, dtype=np.float64) * (rate / target)
    out = np.interp(positions, np.arange(source.size), source)
    return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()


def mono_to_discord(pcm16: bytes, rate: int) -> bytes:
    """Mono PCM at any rate -> 48 kHz stereo, ready to be cut into 20 ms frames for Opus."""
    mono = samples(resample(pcm16, rate, DISCORD_RATE))
    return np.repeat(mono, 2).astype("<i2").tobytes()


def as_float(pcm16: bytes) -> np.ndarray:
    """Samples scaled to [-1, 1) as float32, the form Whisper takes."""
    return samples(pcm16).astype(np.float32) / 32768.0


def discord_frames(pcm48_stereo: bytes) -> list[bytes]:
    """Cut into 20 ms frames; the last one is padded with silence (Opus only takes whole frames)."""
    frames = [
        pcm48_stereo[i : i + DISCORD_FRAME_BYTES]
        for i in range(0, len(pcm48_stereo), DISCORD_FRAME_BYTES)
    ]
    if frames and len(frames[-1]) < DISCORD_FRAME_BYTES:
        frames[-1] = frames[-1].ljust(DISCORD_FRAME_BYTES, b"\0")
    return frames


def duration_s(pcm16: bytes, rate: int, channels: int = 1) -> float:
    return len(pcm16) / (2 * channels * rate)


def rms(pcm16: bytes) -> float:
    """Root mean square of the samples (0 for silence), to tell speech-sized audio from nothing."""
    values = samples(pcm16).astype(np.float64)
    return float(np.sqrt(np.mean(values**2))) if values.size else 0.0


def to_wav(pcm16: bytes, rate: int, channels: int = 1) -> bytes:
    """A complete in-memory WAV file, for services that take a file upload."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16)
    return out.getvalue()


def read_wav(data: bytes) -> tuple[bytes, int]:
    """(mono 16-bit PCM, sample rate) from a WAV file's bytes.

    Parsed by hand rather than with ``wave``: a streamed WAV (espeak-ng's ``--stdout``, many TTS
    servers) declares its data size as 0 or 0xFFFFFFFF because the length was unknown when the
    header went out, and ``wave`` then reads nothing. Here the data chunk simply runs to the end.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioFormatError("not a WAV file")
    fmt: tuple[int, int, int, int] | None = None
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt ":
            fmt = struct.unpack_from("<HHIxxxxxxH", data, body)
        elif chunk == b"data":
            if fmt is None:
                raise AudioFormatError("WAV data before its format chunk")
            end = len(data) if size in (0, 0xFFFFFFFF) else min(len(data), body + size)
            return _mono16(data[body:end], *fmt)
        offset = body + size + (size & 1)
    raise AudioFormatError("WAV file without a data chunk")


def _mono16(
    payload: bytes, encoding: int, channels: int, rate: int, bits: int
) -> tuple[bytes, int]:
    if encoding not in (1, 0xFFFE) or bits != 16:
        raise AudioFormatError(f"only 16-bit PCM WAV is supported (format {encoding}, {bits} bits)")
    values = samples(payload)
    if channels > 1:
        values = values[: len(values) // channels * channels].reshape(-1, channels).mean(axis=1)
    return np.round(values).astype("<i2").tobytes(), rate
