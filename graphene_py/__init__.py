"""graphene_py: graph analytics on SSDs with fine-grained, merged io_uring IO (Graphene, FAST'17)."""
__version__ = "0.1.0"

from .graph import Graph  # noqa: E402,F401
from .errors import GrapheneError, InputFormatError, DatasetError  # noqa: E402,F401
