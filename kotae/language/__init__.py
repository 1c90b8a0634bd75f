"""Reading Japanese and English text: the pieces of the language layer that every stage shares.

Today it holds :mod:`kotae.language.spelling` (a slip of the keyboard or the ear matched to the
records' word); the question's focus, relevance and the answer slot still live beside it in
``kotae/`` and read it from there.
"""
