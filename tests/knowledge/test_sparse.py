"""kotae.knowledge.sparse: BM25 as sparse vectors (fields ``words`` and ``chars``)."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise

import pytest
from hypothesis import given, strategies as st

from kotae.knowledge.sparse import (
    FIELDS,
    Bm25Params,
    char_terms,
    common_terms,
    doc_vector,
    query_vector,
    term_id,
    terms,
)
from kotae.language.text import search_tokens

P = Bm25Params()


def weight(tokens: list[str], term: str, avgdl: float, p: Bm25Params = P) -> float:
    ids, values = doc_vector(tokens, avgdl, p)
    return dict(zip(ids, values, strict=True)).get(term_id(term), 0.0)


# --- term ids -------------------------------------------------------------------------------


def test_term_id_is_pinned_so_stored_indexes_stay_readable() -> None:
    # The index stores these ids; no vocabulary file exists, so they must never change.
    assert term_id("バス") == 915943523
    assert term_id("保育料") == 1296864687
    assert term_id("bus") == 240354870


def test_term_id_is_the_same_in_another_process() -> None:
    # unlike hash(), which is salted per process
    code = "from kotae.knowledge.sparse import term_id; print(term_id('保育料'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == term_id("保育料")


@given(st.text(min_size=1, max_size=30))
def test_term_id_is_a_31_bit_non_negative_int(term: str) -> None:
    tid = term_id(term)
    assert 0 <= tid < 2**31
    assert term_id(term) == tid


def test_different_terms_get_different_ids() -> None:
    vocabulary = [f"語{i}" for i in range(2000)] + ["バス", "バス代", "コミュニティバス", "bus", "buses"]
    assert len({term_id(t) for t in vocabulary}) == len(vocabulary)


# --- character terms ----------------------------------------------------------------------


def test_char_terms_are_unigrams_then_bigrams() -> None:
    assert char_terms("バス代") == ["バ", "ス", "代", "バス", "ス代"]


def test_char_terms_normalise_width_and_case_and_drop_spaces_and_punctuation() -> None:
    assert char_terms("ＡＢ c！") == ["a", "b", "c", "ab", "bc"]
    assert char_terms("バス代！？") == char_terms("バス代")
    assert char_terms("") == [] and char_terms("  。、!?") == []
    assert char_terms("あ") == ["あ"]


def test_char_terms_meet_a_compound_the_word_field_keeps_whole() -> None:
    assert "バス" not in search_tokens("コミュニティバス")
    assert "バス" in set(char_terms("バス代")) & set(char_terms("コミュニティバス"))


def test_terms_by_field() -> None:
    assert FIELDS == ("words", "chars")
    text = "保育料はいくらになりますか？"
    assert terms("words", text) == search_tokens(text)
    assert terms("chars", text) == char_terms(text)


# --- document vectors ----------------------------------------------------------------------


def test_default_parameters() -> None:
    assert (P.k1, P.b) == (0.5, 0.9)


def test_bm25_weight_of_a_single_term_at_average_length() -> None:
    # dl = avgdl: norm = k1, weight = tf (k1 + 1) / (tf + k1) = 1.5 / 1.5
    assert weight(["a"], "a", avgdl=1.0) == pytest.approx(1.0)
    p = Bm25Params(k1=1.2, b=0.75)
    tokens = ["a", "a", "b", "c"]  # tf 2, dl 4
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 8.0)
    assert weight(tokens, "a", avgdl=8.0, p=p) == pytest.approx(2 * 2.2 / (2 + norm))


def test_weight_grows_with_term_frequency_and_saturates_below_k1_plus_1() -> None:
    weights = [weight(["a"] * tf + ["x"] * (10 - tf), "a", avgdl=10.0) for tf in range(1, 10)]
    assert all(lo < hi for lo, hi in pairwise(weights))
    assert weights[-1] < P.k1 + 1
    gains = [hi - lo for lo, hi in pairwise(weights)]
    assert all(g2 < g1 for g1, g2 in pairwise(gains))  # diminishing returns


def test_weight_decreases_with_document_length() -> None:
    weights = [weight(["a"] + ["x"] * pad, "a", avgdl=5.0) for pad in (0, 2, 5, 10, 40)]
    assert all(hi > lo for hi, lo in pairwise(weights))


def test_without_length_normalisation_length_does_not_matter() -> None:
    p = Bm25Params(k1=0.5, b=0.0)
    assert weight(["a"], "a", avgdl=5.0, p=p) == pytest.approx(weight(["a"] + ["x"] * 30, "a", avgdl=5.0, p=p))


def test_doc_vector_has_one_entry_per_distinct_term() -> None:
    ids, values = doc_vector(["a", "b", "a", "c", "a"], avgdl=5.0, p=P)
    assert len(ids) == len(values) == 3
    assert set(ids) == {term_id("a"), term_id("b"), term_id("c")}
    assert all(v > 0 for v in values)
    assert doc_vector([], avgdl=3.0, p=P) == ([], [])


def test_doc_vector_survives_a_zero_average_length() -> None:
    ids, values = doc_vector(["a"], avgdl=0.0, p=P)
    assert ids == [term_id("a")] and values[0] > 0


# --- query vectors -------------------------------------------------------------------------


def test_query_vector_dedupes_and_weights_each_term_one() -> None:
    ids, values = query_vector(["バス", "運賃", "バス", "バス"])
    assert ids == sorted({term_id("バス"), term_id("運賃")})
    assert values == [1.0, 1.0]


def test_query_vector_of_nothing_is_empty() -> None:
    assert query_vector([]) == ([], [])


# --- common terms ---------------------------------------------------------------------------


def test_common_terms_are_those_in_more_than_half_the_chunks() -> None:
    chunks = [["の", "は", "バス"], ["の", "は", "保育料"], ["の", "運賃"], ["バス", "運賃"]]
    assert common_terms(chunks, share=0.5, min_chunks=1) == ["の"]  # は and バス: exactly half, not more
    assert common_terms(chunks, share=0.25, min_chunks=1) == ["の", "は", "バス", "運賃"]


def test_a_small_knowledge_base_has_no_common_terms() -> None:
    # in a handful of chunks even a frequent term may be the one that tells two apart
    chunks = [["の", "バス"], ["の", "保育料"], ["の", "運賃"]]
    assert common_terms(chunks, min_chunks=500) == []
    assert common_terms(chunks * 200) == ["の"]  # 600 chunks
