"""IoIterator: the Graphene IO-request-centric iterator (§4.3). See core.py."""
from .atomics import atomic_add, atomic_cas, atomic_min, atomic_or  # noqa: F401
from .core import STAT_KEYS, Block, IoIterator, drop_memory_cache  # noqa: F401
from .frontier import Frontier  # noqa: F401
