"""LANG-4 / SEC-6: the leak check reads every script. A DM fact written in Chinese or Russian is
caught in a server reply as an English one is; ordinary Cyrillic and Greek text is not folded into
Latin noise; one shared everyday word of Chinese is not a leak."""

from __future__ import annotations

import pytest
from conftest import guild_ctx, remember

from memory.evasions import fold, unmasked
from memory.models import Visibility

CASES = {
    "chinese": ("爱丽丝的治疗师是王医生", "对了，王医生是她的治疗师。"),
    "russian": ("Мой терапевт — доктор Вомбатсон", "Её терапевт — доктор Вомбатсон."),
    "japanese": ("アリスのパスワードはモモンガ", "合言葉はモモンガだよ"),
    "greek": ("Ο θεραπευτής μου είναι ο Βομβατσον", "Ο θεραπευτής της είναι ο Βομβατσον."),
}


@pytest.mark.parametrize("language", sorted(CASES))
def test_a_dm_fact_in_any_script_is_caught_in_a_server_reply(engine, language):
    fact, reply = CASES[language]
    memory = remember(engine, fact, scope_id="alice", visibility=Visibility.PRIVATE)
    leaks = engine.leaks.check(guild_ctx("g1", "bob"), reply)
    assert [(leak.memory_id, leak.kind) for leak in leaks] == [(memory.id, "dm-private")]


def test_one_everyday_chinese_word_shared_with_a_dm_fact_is_not_a_leak(engine):
    remember(engine, CASES["chinese"][0], scope_id="alice", visibility=Visibility.PRIVATE)
    assert engine.leaks.check(guild_ctx("g1", "bob"), "我明天要去看医生。") == ()


def test_what_the_place_said_in_chinese_is_seen(engine):
    remember(engine, CASES["chinese"][0], scope_id="alice", visibility=Visibility.PRIVATE)
    reply = "王医生？你刚才说过。"
    assert engine.leaks.check(guild_ctx("g1", "bob"), reply, seen="Bob: 你认识王医生吗？") == ()


@pytest.mark.parametrize(
    "text",
    ["привет, как дела у Алисы", "Καλημέρα, τι κάνεις", "ภาษาไทยง่ายนิดเดียว", "नमस्ते दुनिया"],
)
def test_ordinary_text_of_other_scripts_is_read_as_it_is_written(text):
    assert fold(text) == text
    assert unmasked(text)[0] == text


def test_a_latin_word_disguised_with_cyrillic_letters_is_still_unmasked():
    assert fold("Dr W\u043embats\u043en") == "Dr Wombatson"
    assert fold("\u0405\u0443\u0455t\u0435m \u0421\u041e\u0420\u0415 here") == "System COPE here"
