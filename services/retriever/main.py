"""The retriever as its own process: ``kotae serve retriever`` or
``faststream run kotae.services.retriever.main:app`` (with KOTAE_NATS_URL set)."""

from kotae.runtime import lazy_app
from kotae.services.retriever import STAGE

__getattr__ = lazy_app(STAGE)
