"""The verifier as its own process: ``kotae serve verifier`` or
``faststream run kotae.services.verifier.main:app`` (with KOTAE_NATS_URL set)."""

from kotae.runtime import lazy_app
from kotae.services.verifier import STAGE

__getattr__ = lazy_app(STAGE)
