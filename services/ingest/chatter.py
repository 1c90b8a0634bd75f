"""The offline question detector: a comment goes on to retrieval unless it is certainly chatter.

A question dropped here is lost for good, while a comment that reaches the retriever
and finds nothing ends ``unanswered`` at the cost of one search; so the rules drop
only what is certainly not a question:

* comments with nothing to search for: laughter (ｗｗ, 草), applause (888), emoji,
  kaomoji, bare greetings;
* comments made only of chat vocabulary — greetings, thanks, cheering, reactions and
  feelings (かわいい, 初見, 待機, 応援してます, "nice stream"), or a remark about the stream
  itself (声, 音, BGM … with 聞こえる, 小さい, いい …) — with no question form.

Everything else goes on: a bare keyword in any script or width (宿泊税, ほちょうき,
ﾊﾞｽ代), a noun phrase ending in は/のは (創設者は), hearsay (〜って聞いた), requests
(なんとかして), complaints and personal situations (うちの子が〜で詰んでる): the
retriever's gate decides whether the knowledge base covers them.

The vocabulary is Sudachi's normalised forms (``kotae.language.text.search_tokens``),
so 可愛い, かわいい and カワイイ are one word, and compounds are never broken into chat
words: ファンクラブ is not ファン.
"""

from __future__ import annotations

import re
import unicodedata

from kotae.knowledge.records import detect_lang
from kotae.language.text import normalize, search_tokens

# --- question forms: a comment that asks is never chatter ---------------------------------

_JA_QUESTION = re.compile(
    r"(何|なに|なん[でだの?]|いつ|どこ|どれ|どの|どう|どんな|どっち|誰|だれ|なぜ|なんで|いくら|幾ら|いくつ|何人|何か所|"
    r"ですか|ますか|でしょうか|ません?か|んですか|のか|かな|っけ|教えて|知りたい|ください|下さい|てほしい|て欲しい|"
    r"ある\?|あるの|なるの|できる\?|できるの|出来る\?|本当|ほんと|予定は|って\?|は\?|なの\?|の\?|か\?)"
)
_JA_FINAL = re.compile(r"(か|の|かな|っけ|って|てよ|てね|てる\?|たい\?)[\s!?。]*$")
_JA_REQUEST = re.compile(
    r"(聞きたい|聞かせて|説明して|詳しく|お願いします|おしえて|知りたい|気になる|気になります|わからない|分からない)"
)
# Question words used as adverbs or exclamations ask nothing: いつも, どこでも, 何回, 何これ,
# 本当に, どうしよう, そういうことか. They are removed before the question patterns run.
_JA_NOT_ASKING = re.compile(
    r"(いつも|いつでも|どこでも|どこまでも|何回|何度|何これ|なにこれ|何この|本当に|ほんとに|ほんとそれ|どうしよう|"
    r"どうも|ありがとう|ことか|そうか)"
)
_EN_QUESTION = re.compile(
    r"^(what|when|where|who|whom|why|how|which|is|are|can|could|do|does|did|will|would|should|has|have|"
    r"tell|explain|please|any|anyone)\b|"
    r"\b(what|when|where|why|how much|how many|how long|how do|how does|how will|which|is there|are there|"
    r"can you|could you|will you|would you|do you|does it|did you|tell|say|explain|please share|wondering|"
    r"curious|i want to know|i'?d like to know|need info|info on|more about|any plans?|any news)\b",
    re.IGNORECASE,
)
# Exclamations shaped like questions: "what a great stream", "how cute".
_EN_EXCLAIM = re.compile(r"^(what an?|how (cute|nice|cool|fun|sweet|great|lovely|beautiful))\b", re.IGNORECASE)

# --- chat vocabulary (normalised forms) --------------------------------------------------

# Chat by themselves: greetings, thanks, cheering, reactions, feelings, agreement.
_REACTIONS = frozenset(
    """
    初見 始める お疲れ様 疲れ おつ 乙 只今 今晩 御早う 願う 御座る 感謝 有り難い 助かる 頑張る がんば 応援 ファイト
    期待 楽しみ 待つ 待機 来る キター 可愛い 過ぎる 奇麗 綺麗 かっこいい 格好良い 素敵 凄い やばい えぐい 神 最高 天才
    偉い 強い 尊い エモい 推す 推し 好き 大好き 優勝 優しい 面白い 楽しい 嬉しい 笑う 悪い 受ける 草 爆笑 懐かしい
    感動 泣く 眠い 寂しい 悲しい 惜しい 残念 ナイス 上手 旨い 流石 素晴らしい 良い 本当 分かる 確か 成る程 同じ 右
    賛成 納得 了解 乾杯 拍手 元気 お目出度う 目出度い 可笑しい 寝る 寝落ち 落ち ヤッホー 邪魔
    hi hello hey yo lol lmao rofl gg nice cool wow omg love cute great awesome amazing beautiful first hype pog
    poggers yay thank thanks welcome bye good evening morning night gn gm congrat congratulation fun funny ok okay
    lit same agree meet
    """.split()
)
# The stream itself: chat when a remark about it goes with it ("声めっちゃ聞きやすい", "sound is low").
_STREAM = frozenset(
    "声 音 音量 bgm マイク 画質 映像 画面 配信 コメント 字幕 stream streaming music audio sound voice mic video chat".split()
)
_REMARKS = frozenset(
    "聞こえる 聞く 見る 見える 小さい 大きい 遅延 ラグ 重い 途切れる 止まる low loud quiet lag".split()
)
# Words that name no topic: time of day, intensifiers, "everyone".
_FILLERS = frozenset(
    "今日 明日 昨日 今夜 今 いつも 一番 まじ 皆 皆さん 超 everyone guy all today tonight one keep going go let luck see tomorrow soon again really here".split()
)
# Fixed chat expressions that Sudachi would read as words (キタ as 北, 今北産業 as 今北 + 産業).
_EXPRESSIONS = re.compile(r"(キタ|きた)[ー━!]+|今北産業|8{3,}|[wｗ]{2,}")


def _wordlike(token: str) -> bool:
    """A token holding a letter or digit (kaomoji leave marks such as ゚ behind)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in token)


def asks(normalized: str) -> bool:
    """True when the comment has a question or request form (?, 何/いつ/いくら, ですか, 教えて, what/how …)."""
    if "?" in normalized:
        return True
    if detect_lang(normalized) == "ja":
        asking = _JA_NOT_ASKING.sub("", normalized)
        return bool(_JA_QUESTION.search(asking) or _JA_FINAL.search(asking) or _JA_REQUEST.search(asking))
    if _EN_EXCLAIM.search(normalized):
        return False
    return bool(_EN_QUESTION.search(normalized))


def is_chatter(text: str) -> bool:
    """True only for what is certainly not a question (see the module docstring).

    Example::

        >>> is_chatter("声めっちゃ聞きやすい"), is_chatter("ﾊﾞｽ代"), is_chatter("じいちゃん免許返したら買い物行けなくなる")
        (True, False, False)
    """
    norm = normalize(text)
    tokens = [t for t in search_tokens(_EXPRESSIONS.sub(" ", norm)) if _wordlike(t)]
    if not tokens:
        return True  # nothing to search for: laughter, applause, emoji, a bare greeting
    if asks(norm):
        return False
    words = set(tokens)
    if not words <= _REACTIONS | _STREAM | _REMARKS | _FILLERS:
        return False  # a word that may name a topic: the gate decides
    return bool(words & _REACTIONS) or bool(words & _STREAM and words & _REMARKS) or words <= _FILLERS


def is_question(text: str) -> bool:
    """True for every comment that may be a question or request: all but certain chatter."""
    return not is_chatter(text)
