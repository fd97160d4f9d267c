"""Context-manager support for anything that is released by one ``close()``.

``with Catalog(...) as c:`` and the like: :class:`ClosesOnExit` gives ``__enter__`` (the object
itself) and ``__exit__`` (``close()``, whatever ended the block), so a class writes only its
``close``. It lives in the lowest layer because every layer holds such objects (the app, the
metrics server, a writer lease, the vector backends, the decode pool).
"""

from __future__ import annotations

from typing import Self


class ClosesOnExit:
    """``with obj:`` closes ``obj`` at the end of the block; subclasses define :meth:`close`."""

    def close(self) -> None:
        """Release what the object holds (files, locks, threads, sockets)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["ClosesOnExit"]
