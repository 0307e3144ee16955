"""Which language a person writes in, for the note at the end of their turn ("answer in German"):
the system prompt asks for the person's language, and a small model still answered a German chat in
English every turn (the real 1.5B, issue 43); the same words right before the answer hold better.

By script first (Han without kana: Chinese; kana: Japanese; Hangul: Korean; Cyrillic: Russian or
Ukrainian; Greek, Arabic, Hebrew, Thai, Devanagari), then, in Latin letters, by the little words of
eight languages against English's. None when it cannot tell: a line of two words, a name, English.
"""

from __future__ import annotations

import re

# A Latin-script language wins with at least this many of its little words, and more than English's.
ENOUGH = 2
_SCRIPTS = (
    ("Japanese", re.compile(r"[\u3040-\u30ff]")),  # kana before Han: Japanese writes both
    ("Chinese", re.compile(r"[\u4e00-\u9fff]")),
    ("Korean", re.compile(r"[\uac00-\ud7af]")),
    ("Russian", re.compile(r"[\u0400-\u04ff]")),
    ("Greek", re.compile(r"[\u0370-\u03ff]")),
    ("Arabic", re.compile(r"[\u0600-\u06ff]")),
    ("Hebrew", re.compile(r"[\u0590-\u05ff]")),
    ("Thai", re.compile(r"[\u0e00-\u0e7f]")),
    ("Hindi", re.compile(r"[\u0900-\u097f]")),
)
# "answer in <language>", said in that language: the real 1.5B let "answer in German" pass and
# answered a German chat in English 13 turns of 17
ANSWER_IN = {
    "German": "antworte auf Deutsch",
    "French": "réponds en français",
    "Spanish": "responde en español",
    "Italian": "rispondi in italiano",
    "Portuguese": "responda em português",
    "Dutch": "antwoord in het Nederlands",
    "Turkish": "Türkçe cevap ver",
    "Polish": "odpowiedz po polsku",
    "Chinese": "请用中文回答",
    "Japanese": "日本語で答えてください",
    "Korean": "한국어로 답해 주세요",
    "Russian": "ответь по-русски",
    "Ukrainian": "відповідай українською",
    "Greek": "απάντησε στα ελληνικά",
    "Arabic": "أجب بالعربية",
    "Hebrew": "ענה בעברית",
    "Thai": "ตอบเป็นภาษาไทย",
    "Hindi": "हिंदी में जवाब दो",
}
_UKRAINIAN = re.compile(r"[іїєґІЇЄҐ]")  # Cyrillic letters Russian does not have
_LITTLE_WORDS = {
    "English": "the and is are was were you your my i'm it's this that what with have has for not "
    "of to in on at do don't can we they i a an me from just now where how who when why will "
    "would be been but so if or as by up out about all",
    "German": "und ist sind ich du mein meine nicht das der die den dem ein eine mit auf für "
    "habe hast wir sie es auch noch bei von zu dass bin war jetzt hier gern gerne schon immer "
    "heißt wohnt arbeite",
    "French": "le la les est et je tu mon ma mes pas une des du avec pour que qui dans sur "
    "nous vous suis c'est j'ai",
    "Spanish": "el la los las es y yo tú mi mis una del con para que por pero muy estoy "
    "tengo soy está también",
    "Italian": "il lo la gli le è e io mio mia non una del della con per che sono ho anche "
    "molto questo",
    "Portuguese": "o os as é e eu meu minha não uma do da com para que sou tenho estou muito "
    "também você",
    "Dutch": "de het een en is ik mijn niet met voor dat van op zijn ben heb ook maar",
    "Turkish": "ve bir bu ben sen çok için ile ama değil mi var yok benim",
    "Polish": "i w na nie jest się że to z do jak mam moja mój ale jestem",
}
_ENGLISH = frozenset(_LITTLE_WORDS["English"].split())
# a word that is also English's ("i", "to" and "do" are Polish's too) tells no other language
_WORDS = {
    language: frozenset(words.split()) - (_ENGLISH if language != "English" else frozenset())
    for language, words in _LITTLE_WORDS.items()
}
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
# every other language's little words, for the checks that compare a reply's words with a turn's
LITTLE_WORDS = frozenset().union(*(w for lang, w in _WORDS.items() if lang != "English"))


def written_in(text: str) -> str | None:
    """The language ``text`` is written in, by name in English; None for English, or when it
    cannot tell."""
    letters = "".join(_WORD.findall(text))
    for language, script in _SCRIPTS:
        if len(script.findall(letters)) * 3 >= len(letters) > 0:
            return "Ukrainian" if language == "Russian" and _UKRAINIAN.search(text) else language
    words = [w.lower().replace("’", "'") for w in _WORD.findall(text)]
    counts = {language: sum(w in little for w in words) for language, little in _WORDS.items()}
    english = counts.pop("English")
    (language, most), (_, second) = sorted(counts.items(), key=lambda item: -item[1])[:2]
    # a tie between two (Spanish and Portuguese share many) says nothing sure
    return language if most >= ENOUGH and most > max(english, second) else None
