"""Reading Japanese and English text: the one layer every stage reads a comment, a record or an
answer through.

- :mod:`kotae.language.text` — normalisation (NFKC, chat noise), sentences, search tokens;
- :mod:`kotae.language.sentence_analysis` — a sentence's tokens, readings, numbers and key terms;
- :mod:`kotae.language.terms` — what a comment names, and whether the records have it under any spelling;
- :mod:`kotae.language.spelling` — a slip of the keyboard or the ear matched to the records' word;
- :mod:`kotae.language.question_focus` — the kind of answer asked for and the terms asked about;
- :mod:`kotae.language.answer_slot` — where in the evidence the question's slot is filled;
- :mod:`kotae.language.relevance` — whether an answer addresses what was asked;
- :mod:`kotae.language.grounding` — how much of a sentence its evidence holds.
"""
