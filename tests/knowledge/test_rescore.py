"""kotae.knowledge.rescore: the second stage that reorders the fused candidates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kotae.knowledge.rescore import FEATURES, Candidate, RescoreQuery, RescoreWeights, features, rescore
from kotae.knowledge.sparse import term_id
from kotae.language.text import search_tokens


class Idf:
    """Document frequencies of a made-up knowledge base of 100 chunks."""

    def __init__(self, df: dict[str, int]) -> None:
        self.df = df

    def idf(self, term: str) -> float:
        d = self.df.get(term, 0)
        return math.log(1.0 + (100 - d + 0.5) / (d + 0.5))


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def candidate(title: str, text: str, fused: float, vector: np.ndarray | None = None) -> Candidate:
    """A candidate whose stored words vector holds its title's and text's words, as the index builds it."""
    return Candidate(
        fused=fused,
        title=title,
        text=text,
        vector=vector,
        words=frozenset(term_id(w) for w in search_tokens(f"{title}\n{text}")),
    )


META = Idf({"ラオス": 40, "首都": 5, "メコン川": 8, "オランダ": 30})


def test_the_chunk_that_answers_outranks_one_that_only_repeats_the_topic() -> None:
    query = RescoreQuery.of("ラオスの首都は？", None, META)
    repeats = candidate("ラオス", "ラオスの人口はラオス政府の発表による。ラオスは内陸国である。", fused=1.0)
    answers = candidate("ラオス", "首都はヴィエンチャンである。", fused=0.8)
    order = rescore(query, [repeats, answers])
    assert [i for i, _ in order] == [1, 0]


def test_a_chunk_of_the_topic_the_comment_names_outranks_a_stray_one() -> None:
    query = RescoreQuery.of("ラオスの首都は？", None, META)
    stray = candidate("オランダ", "憲法上の首都はアムステルダムである。", fused=1.0)
    named = [candidate("ラオス", f"首都のヴィエンチャンには{n}がある。", fused=0.9) for n in ("空港", "公園", "市場")]
    order = rescore(query, [stray, *named])
    assert order[0][0] != 0 and order[-1][0] == 0


def test_every_candidate_is_scored_by_its_true_cosine() -> None:
    """A chunk the dense search did not return still has its stored vector compared."""
    q = unit(1, 0, 0)
    query = RescoreQuery.of("季節の雨", q, META)
    near = candidate("気象", "梅雨は初夏の長雨である。", fused=0.9, vector=unit(0.9, 0.1, 0))
    far = candidate("気象", "寒冷前線が通過した。", fused=1.0, vector=unit(0, 1, 0))
    rows = features(query, [far, near])
    dense = FEATURES.index("dense")
    assert rows[1, dense] == pytest.approx(float(np.dot(q, near.vector)))
    assert [i for i, _ in rescore(query, [far, near])] == [1, 0]


def test_features_are_shares_between_zero_and_one() -> None:
    query = RescoreQuery.of("メコン川の水位は？", unit(1, 1, 0), META)
    rows = features(
        query,
        [
            candidate("ラオス", "メコン川の水位は乾季に下がる。", fused=2.0, vector=unit(1, 0, 0)),
            candidate("ラオス", "メコン川は大型船も航行できる。", fused=1.0, vector=unit(0, 0, 1)),
        ],
    )
    assert rows.shape == (2, len(FEATURES))
    assert (rows >= 0).all() and (rows <= 1.0 + 1e-6).all()
    fused, coverage, phrase = (FEATURES.index(f) for f in ("fused", "coverage", "phrase"))
    assert rows[:, fused].tolist() == [1.0, 0.5]
    assert rows[0, coverage] == pytest.approx(1.0) and rows[0, phrase] == pytest.approx(1.0)
    assert rows[1, phrase] < rows[0, phrase]


def test_without_evidence_the_first_stage_order_stands() -> None:
    query = RescoreQuery.of("！？", None, META)
    same = [candidate("", "同じ文。", fused=1.0), candidate("", "同じ文。", fused=1.0)]
    assert [i for i, _ in rescore(query, same)] == [0, 1]
    assert rescore(query, []) == []


def test_rescored_scores_are_a_weighted_mean_of_the_features() -> None:
    query = RescoreQuery.of("首都", None, META)
    [(_, score)] = rescore(query, [candidate("ラオス", "首都はヴィエンチャン。", fused=1.0)])
    assert 0.0 < score <= 1.0
    assert RescoreWeights().vector().sum() == pytest.approx(1.0)
