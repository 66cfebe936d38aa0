"""Writing files the way a user expects: atomically, and with the permissions ``open()`` gives.

Every writer of nnefx (model folders, archives, documents, tensor files, IR, ONNX, CVM,
``nnefx run -o``) writes to a temporary beside the target and renames it into place, so a
failed write never leaves half a file.  ``tempfile`` creates those temporaries private
(0600 files, 0700 folders) whatever the umask; :func:`final_mode` is the mode the target
gets instead: the umask's (``0666 & ~umask`` for files, ``0777 & ~umask`` for folders, as
``open()`` and ``mkdir`` would make them), or, when a file or folder of the same kind is
being replaced in place, the mode it had.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import BinaryIO


def umask() -> int:
    """The process's umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def final_mode(target: str, is_dir: bool) -> int:
    """Permission bits for a new ``target``: the replaced one's, else the umask's."""
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode) == is_dir:
        return stat.S_IMODE(st.st_mode)
    return (0o777 if is_dir else 0o666) & ~umask()


def set_final_mode(tmp: str, target: str, is_dir: bool) -> None:
    """Give the finished temporary ``tmp`` the mode ``target`` should have (see module doc)."""
    os.chmod(tmp, final_mode(target, is_dir))


@contextmanager
def replacing(path: str) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; renamed onto ``path`` on success.

    On any exception the temporary is removed and the exception propagates (``OSError``s
    are left to the caller, which knows how to name the file to the user).
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        set_final_mode(tmp, path, False)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
    """Write ``chunks`` to ``path`` through :func:`replacing`."""
    with replacing(path) as f:
        for chunk in chunks:
            f.write(chunk)
