"""Write-safety filters applied on every write path (WRITE-6, SEC-2, SEC-4).

A memory is normalised and then refused when it is too short or too long, reads like a prompt
injection, is a standing directive to the bot without being filed as guidance/behavioral, or carries a
secret. Where text must be kept (messages, summaries, logs), ``redact_secrets`` keeps it word for word
except each secret, which becomes ``[redacted]``.

Secrets: one list of detectors (``_DETECTORS``) drives both ``contains_secret`` and ``redact_secrets``.

    what                                                  the span that becomes [redacted]
    ----------------------------------------------------  ---------------------------------------------
    PEM private key blocks (RSA, EC, OPENSSH, PGP, ...)   BEGIN line to END line (to the end if cut off)
    keys and tokens with a known shape: OpenAI sk-,       the whole token
      sk-proj-; Anthropic sk-ant-; Stripe sk_/rk_/pk_
      live/test, whsec_; GitHub ghp_/gho_/ghu_/ghs_/ghr_/
      github_pat_; GitLab glpat-/gldt-/glrt-/glptt-;
      Slack xox*-, xapp-, webhooks; Discord bot tokens,
      webhooks; Google AIza; Hugging Face hf_; npm npm_;
      SendGrid SG.x.y; Telegram bot tokens (also inside
      API URLs); AWS key ids AKIA/ASIA; JWTs; Bearer
      tokens
    AWS secret access keys (40 chars of A-Za-z0-9/+)      the 40 characters
    credentials in URLs (scheme://user:password@host)     the password
    "password / pw / pwd / passcode / wifi key ... is X", X: one word, or the text inside quotes
      "X" after ':' or '=', "changed my password to X"
    "api key / secret / access token ... is X"            X, if 6+ chars with a digit, or 16+ chars
    "passphrase / seed phrase / recovery phrase is ..."   the words up to the next , . ; ! ? or line end
    "pin / pin code / cvv / security code ... 1234"       the digits (3 to 8 of them)
    "padlock / locker / safe / sim ... code, pin or       the digits (3 to 8, or a combination dialled
      combination is 4417", "the code for the padlock     in 3-4 parts: 12-34-56)
      is ...", "combination to my locker: ..."
    "login / credentials for X is alice / Tr0ub4dor"      the pair (user and password)
    US social security numbers: 123-45-6789, or after     the number
      "ssn" / "social security number" with spaces
    card numbers, Luhn-valid (see ``_cards``)             the digits and their separators
    IBANs, mod-97-valid, with or without spaces           the IBAN

Knowingly not detected: a secret without a keyword or a known shape ("it's hunter2"); a password whose
value is a common word (``_NOT_A_VALUE``: "my password is too weak"); the words after the first of a
multi-word password (passphrases excepted); a login's password named without its user ("login is Tr0ub4dor");
a 9-digit SSN without dashes or its keyword; never-issued SSNs (area 000, 666, 9xx); card numbers with mixed
separators, in groups other than 4-first, or starting 0, 1, 7, 8 or 9; lower-case IBANs; other account numbers and national ids; a secret
split across messages; a bare "code is 1234" (zip and area codes say the same).

Injection: ``looks_like_injection`` reads the text after ``fold_confusables`` (compatibility forms,
accents, Cyrillic/Greek look-alikes and invisible characters folded away), so "іgnore аll previous
instructions" in Cyrillic is caught as the Latin phrase is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

from .errors import Rejected
from .models import FactKind

MIN_CONTENT, MAX_CONTENT = 3, 2_000
MAX_SUBJECT = 200
REDACTED = "[redacted]"

_INJECTION = re.compile(
    r"ignore (?:(?:all|any|the|of|my|these|those) )*(previous|prior|above|earlier|your) "
    r"(instructions|prompts?|rules|directions|guidelines|commands)"
    r"|disregard (all |any |the )?(previous|prior|above|your) (instructions|rules)"
    r"|forget (all |your )?(previous |prior )?instructions"
    r"|\bsystem prompt\b|\bsystem override\b|\bdeveloper mode\b|\bjailbreak\b|</?system>|\[/?inst\]"
    r"|<\|im_(start|end)\|>|\byou are now (a|an|in)\b|\bnew instructions\s*:",
    re.IGNORECASE,
)
_DIRECTIVE = re.compile(
    r"^\s*(always|never|from now on|you (must|should|will|shall)|do not ever|don't ever|make sure (to|you)"
    r"|respond (only|always)|reply (only|always|in)|stop (saying|using|calling))\b",
    re.IGNORECASE,
)
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """Text that encodes as UTF-8: lone surrogates become U+FFFD, split pairs join up.

    They come from undecodable bytes (a console line read with surrogateescape, a file name) or from a
    JSON ``"\\ud800"`` escape; SQLite, hashing and every channel API need valid UTF-8, and one bad character
    must not cost the whole message (it once raised in ``content_hash``, after the bot said it was saved).
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def normalise_text(text: str) -> str:
    """NFC, control and invisible format characters removed, white space folded."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFC", valid_unicode(str(text))))
    return " ".join(text.split())


def check_memory(subject: str, content: str, kind: FactKind) -> tuple[str, str]:
    """Normalised (subject, content), or ``Rejected`` with the reason in plain words."""
    subject, content = normalise_text(subject), normalise_text(content)
    if len(content) < MIN_CONTENT:
        raise Rejected(f"content is too short (at least {MIN_CONTENT} characters)")
    if len(content) > MAX_CONTENT:
        raise Rejected(f"content is too long ({len(content)} characters; at most {MAX_CONTENT})")
    if not subject:
        subject = content[:60]
    if len(subject) > MAX_SUBJECT:
        raise Rejected(f"subject is too long (at most {MAX_SUBJECT} characters)")
    both = f"{subject}\n{content}"
    if looks_like_injection(both):
        raise Rejected("text reads like an instruction to override the bot's rules; not stored")
    if contains_secret(both):
        raise Rejected(
            "text contains what looks like a secret (key, token, password or card number); never stored"
        )
    if kind not in (FactKind.GUIDANCE, FactKind.BEHAVIORAL) and _DIRECTIVE.search(content):
        raise Rejected(
            "a standing directive to the bot must be stored with kind 'guidance' or 'behavioral'"
        )
    return subject, content


# -- injection: confusables folded before the patterns run --------------------------------------------------
_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic letters drawn like Latin ones (lower and upper case)
        "а": "a",
        "с": "c",
        "ԁ": "d",
        "е": "e",
        "һ": "h",
        "і": "i",
        "ј": "j",
        "ӏ": "l",
        "о": "o",
        "р": "p",
        "ԛ": "q",
        "ѕ": "s",
        "ԝ": "w",
        "х": "x",
        "у": "y",
        "А": "A",
        "В": "B",
        "С": "C",
        "Е": "E",
        "Н": "H",
        "І": "I",
        "Ј": "J",
        "К": "K",
        "М": "M",
        "О": "O",
        "Р": "P",
        "Ѕ": "S",
        "Т": "T",
        "Х": "X",
        "У": "Y",
        "Ү": "Y",
        "Ԛ": "Q",
        "Ԝ": "W",
        "Ӏ": "I",
        # Greek
        "α": "a",
        "ε": "e",
        "ι": "i",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        "γ": "y",
        "ω": "w",
        "Α": "A",
        "Β": "B",
        "Ε": "E",
        "Ζ": "Z",
        "Η": "H",
        "Ι": "I",
        "Κ": "K",
        "Μ": "M",
        "Ν": "N",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Υ": "Y",
        "Χ": "X",
        # Latin small capitals and other look-alikes NFKC leaves alone; Armenian o, u, h, q
        "ᴀ": "a",
        "ʙ": "b",
        "ᴄ": "c",
        "ᴅ": "d",
        "ᴇ": "e",
        "ɢ": "g",
        "ʜ": "h",
        "ɪ": "i",
        "ᴊ": "j",
        "ᴋ": "k",
        "ʟ": "l",
        "ᴍ": "m",
        "ɴ": "n",
        "ᴏ": "o",
        "ᴘ": "p",
        "ʀ": "r",
        "ꜱ": "s",
        "ᴛ": "t",
        "ᴜ": "u",
        "ᴠ": "v",
        "ᴡ": "w",
        "ʏ": "y",
        "ᴢ": "z",
        "ı": "i",
        "ȷ": "j",
        "ɑ": "a",
        "ɡ": "g",
        "ɩ": "i",
        "օ": "o",
        "ս": "u",
        "հ": "h",
        "զ": "q",
        # A blank that NFKC keeps: read it as the space it stands in for
        "\u2800": " ",
    }
)
# Hangul fillers render as nothing but are letters (category Lo), so the category test below misses them.
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
_NON_WORD = re.compile(r"[\W_]+")


def _hidden(ch: str) -> bool:
    """Combining and enclosing marks, format characters (zero-width, bidi, tags), non-space controls."""
    category = unicodedata.category(ch)
    return (
        category in ("Mn", "Me", "Cf") or (category == "Cc" and not ch.isspace()) or ch in _FILLERS
    )


def fold_confusables(text: str) -> str:
    """Text as a reader sees it: compatibility forms (fullwidth, math letters) and accents decomposed (NFKD),
    marks and invisible characters dropped, Cyrillic/Greek look-alikes mapped to Latin. For checks only:
    it loses accents and scripts, so it is never what gets stored."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    return unicodedata.normalize(
        "NFC", "".join(ch for ch in decomposed if not _hidden(ch)).translate(_HOMOGLYPHS)
    )


def looks_like_injection(text: str) -> bool:
    """True when the text, folded, reads like an attempt to override the bot's instructions (any length)."""
    folded = " ".join(fold_confusables(text).split())
    # Punctuation between the words ("ignore_all.previous-instructions") would slip past phrase patterns, so a
    # words-only view is read too; the folded view keeps the tag patterns (<system>, [INST]) whole.
    words = " ".join(_NON_WORD.sub(" ", folded).split())
    return any(_INJECTION.search(view) for view in (folded, words))


# -- secrets --------------------------------------------------------------------------------------------
Span = tuple[int, int]
Detector = Callable[[str], Iterator[Span]]


def contains_secret(text: str) -> bool:
    """True when any detector finds a secret in the text or in its NFKC, invisible-free form."""
    return bool(_spans(text)) or bool(_spans(_secret_view(text)))


def redact_secrets(text: str) -> str:
    """The text with each secret span replaced by ``[redacted]``; everything else is kept as it was."""
    redacted = _redact(str(text))
    view = _secret_view(redacted)
    # A secret typed in fullwidth digits or split by zero-width characters only shows in the NFKC view; then
    # the view is redacted and returned, trading exact characters for never leaking (contains_secret agrees).
    return _redact(view) if view != redacted and _spans(view) else redacted


def _secret_view(text: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def _redact(text: str) -> str:
    out, at = [], 0
    for start, end in _spans(text):
        out += [text[at:start], REDACTED]
        at = end
    return "".join(out) + text[at:]


def _spans(text: str) -> list[Span]:
    """Every detector's spans, sorted, overlapping or touching ones merged (one [redacted] per secret)."""
    merged: list[Span] = []
    for start, end in sorted(span for detect in _DETECTORS for span in detect(text)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _regex(pattern: str, flags: int = 0, valid: Callable[[str], bool] = bool) -> Detector:
    """A detector from a pattern: the named group ``secret`` (else the whole match) is the span, if ``valid``."""
    compiled = re.compile(pattern, flags)
    group = "secret" if "secret" in compiled.groupindex else 0

    def detect(text: str) -> Iterator[Span]:
        for match in compiled.finditer(text):
            if match.group(group) and valid(match.group(group)):
                yield _inside_quotes(match.group(group), *match.span(group))

    return detect


def _inside_quotes(value: str, start: int, end: int) -> Span:
    # A quoted value keeps its quotes ('password is "[redacted]"'), so redacted JSON stays JSON.
    quoted = len(value) > 2 and (value[0], value[-1]) in (
        ('"', '"'),
        ("'", "'"),
        ("`", "`"),
        ("“", "”"),
    )
    return (start + 1, end - 1) if quoted else (start, end)


# Tokens end where their alphabet ends; a trailing \b would fail on a token ending in '-'.
_END = r"(?![A-Za-z0-9_-])"
_TOKENS = (
    r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}",  # OpenAI sk-, sk-proj-; Anthropic sk-ant-
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}",  # Stripe
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",  # GitHub
    r"\bgl(?:pat|dt|rt|ptt|soat)-[A-Za-z0-9_-]{20,}",  # GitLab
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}",  # Slack
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}",
    r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    r"\bAIza[0-9A-Za-z_-]{35}" + _END,  # Google API key
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\bnpm_[A-Za-z0-9]{30,}",  # npm
    r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",  # SendGrid
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"(?<!\d)\d{8,10}:[A-Za-z0-9_-]{35}"
    + _END,  # Telegram; no \b: in API URLs it follows 'bot' directly
    r"\b[MNO][A-Za-z\d]{23,27}\.[\w-]{6}\.[\w-]{27,38}" + _END,  # Discord bot token
    r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWT
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
)


def _has_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value)


# -- AWS secret access keys: 40 characters of base64 with no prefix ---------------------------------------
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])")
_AWS_CONTEXT = re.compile(r"aws|secret", re.IGNORECASE)


def _aws_secret_keys(text: str) -> Iterator[Span]:
    """A 40-character run with both cases and a digit, '/' or '+' (random base64 nearly always has them;
    words, git SHAs and UUIDs do not) and fewer than 3 slashes, or any 40-character run right after 'aws'
    or 'secret'.
    Trade-off: a 40-character CamelCase identifier with a digit is redacted too."""
    for match in _AWS_SECRET.finditer(text):
        key = match.group()
        # Three or more slashes reads as a file path, not a key (random base64 has that many about 1 time in 40).
        shaped = (
            key != key.lower()
            and key != key.upper()
            and (_has_digit(key) or "/" in key or "+" in key)
            and key.count("/") < 3
        )
        if shaped or _AWS_CONTEXT.search(text, max(0, match.start() - 40), match.start()):
            yield match.span()


# -- secrets in prose: a keyword, a verb, a value ----------------------------------------------------------
# Words that open a noun phrase ("the", "my", "it"...).
_DETERMINERS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "it",
        "not",
    ]
)
# Common words that follow "password is" without being one ("my password is too weak", "... is in the drawer").
# Trade-off: a real password that is one of these words is not caught.
_NOT_A_VALUE = _DETERMINERS | frozenset(
    [
        "no",
        "too",
        "very",
        "so",
        "still",
        "now",
        "also",
        "just",
        "being",
        "been",
        "same",
        "different",
        "wrong",
        "incorrect",
        "correct",
        "right",
        "required",
        "needed",
        "invalid",
        "expired",
        "weak",
        "strong",
        "long",
        "short",
        "safe",
        "secure",
        "secret",
        "hidden",
        "private",
        "saved",
        "stored",
        "changed",
        "reset",
        "set",
        "written",
        "somewhere",
        "here",
        "there",
        "in",
        "on",
        "at",
        "under",
        "inside",
        "with",
        "of",
        "for",
        "from",
        "to",
        "case-sensitive",
        "easy",
        "hard",
        "simple",
        "great",
        "good",
        "bad",
        "fine",
        "ok",
        "okay",
        "what",
        "which",
        "why",
        "how",
        "where",
        "when",
        "something",
        "nothing",
        "anything",
        "one",
        "all",
        "like",
        "literally",
        "probably",
        "are",
        "is",
        "was",
        "be",
        "should",
        "must",
        "can",
        "will",
    ]
)

# not \b: 'db_password=' must match, 'spin' must not
_START, _STOP = (
    r"(?<![A-Za-z0-9])",
    r"(?![A-Za-z0-9])",
)
# "for my bank", "to the wifi": up to four words between the keyword and its verb, led by a preposition, so
# "password manager is great" (no preposition) is not read as a password.
_QUALIFIER = r"(?:\s+(?:for|to|of|on|at|in|from)(?:\s+[\w'’.-]+){1,4}?)?"
_VERB = r"""(?:["']?\s*[:=]\s*|\s+(?:is|was|are|will\s+be)\s*:?\s+(?:now\s+|still\s+|just\s+|simply\s+)?|['’]s\s+)"""
_NOT_REDACTED = r"""(?!["'`“]?\[redacted\])"""  # redacting twice changes nothing
_QUOTED = r""""(?:[^"\\\n]|\\.){1,300}"|'[^'\n]{1,300}'|`[^`\n]{1,300}`|“[^”\n]{1,300}”"""
# One word, or quoted text in full (its quotes kept). Closing quotes and brackets and one , . ; : ! ? after
# the word stay visible: they are usually the sentence's or the JSON's (trade-off: a password ending in one
# of them shows that last character).
_WORD_VALUE = (
    rf"""{_NOT_REDACTED}(?P<secret>{_QUOTED}|\S+?)(?=[)\]}}"'”’]*[,.;:!?]?[)\]}}"'”’]*(?:\s|$))"""
)
_PHRASE_WORD = r"""[^\s,.;!?"'”’)\]}]+"""
_PHRASE_VALUE = (
    rf"{_NOT_REDACTED}(?P<secret>{_QUOTED}|{_PHRASE_WORD}(?:[ \t]+{_PHRASE_WORD}){{0,23}})"
)

# "pw", "pwd": the shorthand people type ("my pw is ...", "online banking pw = ..."); nothing else spells so.
_PASSWORD_WORDS = r"passwords?|passwd|pwd|pw|passcodes?|pass\s+codes?|wi-?fi\s+(?:key|code)"
_TOKEN_WORDS = (
    r"(?:api|secret|access|auth|bearer|bot|refresh|session|client|private|app)[ _-]?"
    r"(?:keys?|tokens?|secrets?|passwords?)|tokens?|secrets?"
)
_PHRASE_WORDS = r"pass[ -]?phrases?|(?:seed|recovery|secret|mnemonic)[ -]phrases?|mnemonic[ -]seed"
_NUMBER_WORDS = (
    r"pin[ -]?codes?|pin[ -]?numbers?|pins?|cvv2?|cvc2?|csc|(?:card\s+)?security[ -]codes?"
    r"|(?:verification|2fa|otp|one[ -]time|backup|recovery|door|alarm|gate)[ -]codes?|otp"
    r"|(?:(?:pad|bike|door|gym|luggage|suitcase)?lock|locker|safe|keypad|garage|entry|unlock|sim|puk|voicemail)"
    r"[ -](?:codes?|combo|combination|pins?)|puk"
)
# Things that are opened with a code: "the code for the padlock is 4417", "combination to my locker: 12-34-56".
_LOCKED = r"(?:pad|bike|door|gym|luggage|suitcase)?locks?|lockers?|safes?|keypads?|garage(?:\s+door)?|front\s+door|gate|alarm|phone"
_CODE_FOR = rf"{_START}(?:code|combo|combination|pin)\s+(?:for|to|of|on)\s+(?:the\s+|my\s+|our\s+)?(?:{_LOCKED}){_STOP}"
# A combination may be dialled in parts ("12-34-56", "4 17 32"); a single number needs 3-8 digits like a PIN.
_COMBINATION_VALUE = rf"(?P<secret>\d{{1,3}}(?:[ -]\d{{1,3}}){{2,3}}|\d{{3,8}}){_STOP}"
# A login named as "user / password" (or "user:password") after "login/credentials for X is": the pair is the secret.
_LOGIN_WORDS = r"log-?ins?|sign-?ins?|credentials|creds|user(?:name)?\s+and\s+password"
_PAIR_VALUE = r"""(?P<secret>[^\s/:|]+\s*[/:|]\s*[^\s,;]+?)(?=[,.;!?)"'”’]?(?:\s|$))"""
# US social security numbers: 3-2-4 digits with dashes (dates and phone numbers are grouped otherwise), or
# after "ssn" / "social security number" with any separator. Area 000, 666 and 900-999, group 00 and serial
# 0000 are never issued, so such a number is left alone.
_SSN_SHAPE = r"(?!000|666|9\d\d)\d{3}(?P<sep>[- ]?)(?!00)\d{2}(?P=sep)(?!0000)\d{4}"
_SSN_DASHED = r"(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}"
_SSN_WORDS = r"ssn|ss#|social\s+security(?:\s+(?:number|no\.?|#))?"
_NUMBER_VALUE = rf"(?P<secret>\d{{3,8}}){_STOP}"


def _plain_word(value: str) -> bool:
    """A value worth redacting: quoted, or not one of the common words that follow 'password is'."""
    return value[0] in "\"'`“" or value.lower() not in _NOT_A_VALUE


def _token_value(value: str) -> bool:
    # "the secret is out", "the token is expired": token-ish keywords need a value shaped like a key.
    return _plain_word(value) and len(value) >= 6 and (_has_digit(value) or len(value) >= 16)


def _phrase_value(value: str) -> bool:
    return value.split()[0].lower() not in _DETERMINERS


def _pair_value(value: str) -> bool:
    # "the login is at 10:30" is a time, not a pair; a pair already redacted stays as it is.
    return REDACTED not in value and not re.fullmatch(r"[\d\s/:|]+", value)


def _keyword(words: str) -> str:
    return rf"{_START}(?:{words}){_STOP}{_QUALIFIER}"


_PROSE = (
    _regex(_keyword(_PASSWORD_WORDS) + _VERB + _WORD_VALUE, re.IGNORECASE, _plain_word),
    _regex(
        rf"{_START}(?:set|sets|setting|changed?|changing|reset|updated?|updating)\s+(?:[\w'’-]+\s+){{0,3}}?"
        rf"(?:passwords?|passcodes?|pins?)\s+to\s+" + _WORD_VALUE,
        re.IGNORECASE,
        _plain_word,
    ),
    _regex(_keyword(_TOKEN_WORDS) + _VERB + _WORD_VALUE, re.IGNORECASE, _token_value),
    _regex(_keyword(_PHRASE_WORDS) + _VERB + _PHRASE_VALUE, re.IGNORECASE, _phrase_value),
    _regex(_keyword(_NUMBER_WORDS) + _VERB + _NUMBER_VALUE, re.IGNORECASE),
    # Right after the keyword a number needs no verb ("PIN 4921", "cvv 123"): the value must be 3-8 digits, which
    # prose rarely puts there ("the pin on the map" has none). After a qualifier it does ("pins for the 2024 tour").
    _regex(rf"{_START}(?:{_NUMBER_WORDS}){_STOP}\s*#?\s*" + _NUMBER_VALUE, re.IGNORECASE),
    _regex(_CODE_FOR + _VERB + _COMBINATION_VALUE, re.IGNORECASE),
    _regex(
        rf"{_START}(?:(?:{_LOCKED})\s+)?combinations?{_STOP}{_QUALIFIER}"
        + _VERB
        + _COMBINATION_VALUE,
        re.IGNORECASE,
    ),
    _regex(_keyword(_LOGIN_WORDS) + _VERB + _PAIR_VALUE, re.IGNORECASE, _pair_value),
    _regex(rf"(?<![\d-])(?P<secret>{_SSN_DASHED})(?![\d-])"),
    _regex(
        rf"{_START}(?:{_SSN_WORDS}){_STOP}{_QUALIFIER}(?:{_VERB}|\s*#?\s*)(?P<secret>{_SSN_SHAPE}){_STOP}",
        re.IGNORECASE,
    ),
    _regex(
        r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:(?P<secret>[^\s/@]+)@",
        re.IGNORECASE,
        lambda v: v != REDACTED,
    ),
    _regex(r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)", 0, _has_digit),
)


# -- card numbers -----------------------------------------------------------------------------------------
_DIGIT_RUN = re.compile(r"(?<!\d)\d+(?:[ ./-]\d+)*(?!\d)")
_DIGITS = re.compile(r"\d+")


def _cards(text: str) -> Iterator[Span]:
    """Luhn-valid numbers shaped like cards: 13-19 digits unseparated, or 3-5 groups split by one kind of
    separator (space, dash, dot or slash), the first of 4 digits and the rest of 3-6 (4-4-4-4, 4-6-5 Amex,
    4-4-4-4-3). Only issuer ranges 2-6 (Visa, Mastercard, Amex, Discover, UnionPay...). Each run of numbers is
    cut into windows of groups, so a date or phone number beside the card does not hide it; a short list of
    4-digit numbers that passes Luhn by chance (1 in 10) would be redacted: the trade-off for any separator."""
    for run in _DIGIT_RUN.finditer(text):
        groups = [
            (run.start() + m.start(), run.start() + m.end()) for m in _DIGITS.finditer(run.group())
        ]
        i = 0
        while i < len(groups):
            j = _longest_card(text, groups, i)
            if j is None:
                i += 1
            else:
                yield groups[i][0], groups[j][1]
                i = j + 1


def _longest_card(text: str, groups: list[Span], i: int) -> int | None:
    """Index of the last group of the longest card that starts at group ``i`` (at most 5 groups), or None."""
    for j in range(min(i + 4, len(groups) - 1), i - 1, -1):
        if _card_window(text, groups[i : j + 1]):
            return j
    return None


def _card_window(text: str, groups: list[Span]) -> bool:
    parts = [text[s:e] for s, e in groups]
    separators = {text[a[1] : b[0]] for a, b in zip(groups, groups[1:], strict=False)}
    if len(parts) == 1:
        shaped = 13 <= len(parts[0]) <= 19
    else:
        grouped = len(parts[0]) == 4 and all(3 <= len(p) <= 6 for p in parts[1:])
        shaped = len(parts) >= 3 and len(separators) == 1 and grouped
    digits = "".join(parts)
    return shaped and 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


# -- IBANs ------------------------------------------------------------------------------------------------
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_IBAN_PART = re.compile(r"[A-Z0-9]+")


def _ibans(text: str) -> Iterator[Span]:
    """Upper-case IBANs, spaced in fours or not, that pass the mod-97 check (1 in 97 random strings would).
    The longest valid prefix of the match counts, so a code word after the IBAN does not hide it."""
    for match in _IBAN.finditer(text):
        parts = list(_IBAN_PART.finditer(match.group()))
        for n in range(len(parts), 0, -1):
            compact = "".join(p.group() for p in parts[:n])
            if 15 <= len(compact) <= 34 and _mod97(compact):
                yield match.start(), match.start() + parts[n - 1].end()
                break


def _mod97(iban: str) -> bool:
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


_DETECTORS: tuple[Detector, ...] = (
    *(_regex(p) for p in _TOKENS),
    _aws_secret_keys,
    *_PROSE,
    _cards,
    _ibans,
)
