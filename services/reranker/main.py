"""The reranker as its own process: ``kotae serve reranker`` or
``faststream run kotae.services.reranker.main:app`` (with KOTAE_NATS_URL set)."""

from kotae.runtime import lazy_app
from kotae.services.reranker import STAGE

__getattr__ = lazy_app(STAGE)
