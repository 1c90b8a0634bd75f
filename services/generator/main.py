"""The generator as its own process: ``kotae serve generator`` or
``faststream run kotae.services.generator.main:app`` (with KOTAE_NATS_URL set)."""

from kotae.runtime import lazy_app
from kotae.services.generator import STAGE

__getattr__ = lazy_app(STAGE)
