"""``faststream run kotae.services.onair.main:app`` (or ``kotae serve onair``)."""

from kotae.runtime import lazy_app
from kotae.services.onair import STAGE

__getattr__ = lazy_app(STAGE)
