"""The evaluator as its own process: ``kotae serve evaluator`` or
``faststream run kotae.services.evaluator.main:app`` (with KOTAE_NATS_URL set)."""

from kotae.runtime import lazy_app
from kotae.services.evaluator import STAGE

__getattr__ = lazy_app(STAGE)
