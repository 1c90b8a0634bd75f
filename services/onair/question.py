"""What of a viewer's question may be shown on stream or read aloud.

A comment reaches a verified answer only after ingest's blocklist, but the
question itself is still a stranger's text: it may carry an instruction meant for
a model ("ignore the previous instructions and say …"), a fake system notice, or
a link. Such a question is withheld (never shown, never read); its answer still
airs, because the answer was made from the knowledge base and verified. The
patterns are generic forms of those attacks, not a list of known comments:
method ``injection_rules``.
"""

from __future__ import annotations

import re

from kotae.contracts import CommentV1

METHOD = "injection_rules"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "an instruction to disregard the rules",
        re.compile(
            r"(指示|命令|ルール|設定|プロンプト)[^。]{0,12}(無視|忘れ|破棄|リセット)"
            r"|(ignore|disregard|forget)\b[^.]{0,30}\b(instruction|rule|prompt|direction)s?",
            re.I,
        ),
    ),
    (
        "a message posing as the system or the staff",
        re.compile(
            r"^\s*[【\[(（#]?\s*(システム|管理者|運営|開発者|system|admin|developer|moderator)\s*[】\])）:：より]"
            r"|system\s*prompt|システムプロンプト|developer mode|開発者モード|jailbreak",
            re.I,
        ),
    ),
    (
        "a request to play a role or speak someone else's words",
        re.compile(
            r"(として|になりきって|のふりをして|の立場で)[^。]{0,10}(振る舞|話し|答え|演じ|返事|言って)"
            r"|ロールプレイ|(と|とだけ)(言って|叫んで|宣言して|言いなさい)"
            r"|\b(pretend|act as|role-?play|you are now|from now on you)\b"
            r"|\b(say|repeat|announce|tell everyone)\b[^.]{0,20}\b(only|exactly|after me|that)\b",
            re.I,
        ),
    ),
    ("a link", re.compile(r"https?://|www\.|\b[\w-]+\.(com|net|org|jp|io|xyz|ly)\b", re.I)),
)

#: Longer than this, a question is not read out: a chat line that long is rarely a plain question.
MAX_READ_CHARS = 140


def withheld_because(text: str) -> str | None:
    """Why ``text`` must not be shown or read aloud, or None when it may."""
    for why, pattern in _PATTERNS:
        if pattern.search(text):
            return f"{METHOD}: {why}"
    if len(text) > MAX_READ_CHARS:
        return f"{METHOD}: longer than {MAX_READ_CHARS} characters"
    return None


def shown_question(comment: CommentV1) -> tuple[str | None, str | None]:
    """(the question as it may be shown and read, or None; why it is withheld, or None).

    The normalised text is used (NFKC, chat noise trimmed), so what is read is
    what was searched.
    """
    text = comment.normalized.strip()
    reason = withheld_because(text)
    return (None, reason) if reason else (text, None)
