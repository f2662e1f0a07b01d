"""Messages between dpledger and a third-party method's process, without pickle.

A message is a tree of JSON values (numbers, strings, booleans, None, lists, tables with string
keys) and numpy arrays. It crosses a pipe as one frame of bytes (never pickle): its length, the
length of a JSON header, the header, and the raw bytes of each array (:class:`Link`). The header
replaces each array by its index, dtype (the ``.npy`` format's description, so a structured
dtype crosses too; a dtype holding Python objects is refused) and shape; a table is wrapped so
that no key of the sender's can be taken for an array. Reading checks every size against the
header, so a malformed message is an error (:class:`WireError`), never a wrong value.

A large frame crosses through memory instead of the pipe: a region shared by the two sides
(:func:`shared_regions`, made by dpledger's process, of a size no side can change), else a
file in memory (tmpfs). Either way the reader copies the frame once into memory of its own
before it reads a byte of it, so the writer cannot change what was read.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import re
import select
import struct
import tempfile
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # not a POSIX system: no shared regions, large frames go through files
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MAX_FRAME",
    "REGION_SIZE",
    "SPILL_ABOVE",
    "Link",
    "SharedRegion",
    "WireError",
    "shared_regions",
]

#: the largest message a reader accepts (bytes)
MAX_FRAME = 1 << 36
#: a frame larger than this goes through a file in memory (tmpfs) instead of the pipe, which
#: would take one switch between the processes per pipe buffer; the pipe then carries its name
SPILL_ABOVE = 1 << 18
_SPILLED = 1 << 63
#: the frame is in the writer's shared region (from its start)
_SHARED = 1 << 62
#: bytes of a shared region (memory is only used where a frame was written)
REGION_SIZE = 1 << 30
_SPILL_NAME = re.compile(r"dpledger-wire-[0-9a-f]{32}")
_SPILL_NAME_BYTES = 46
_SPILL_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_LENGTH = struct.Struct("!I")
_FRAME = struct.Struct("!Q")
#: arrays start at multiples of this many bytes of a frame
_ALIGN = 64
#: buffers one gathering write takes at most
_MAX_PARTS = 512
_ARRAY = "$a"
_TABLE = "$t"


class WireError(Exception):
    """A message could not be written or read (what, and why)."""


def _descr_in(descr: Any) -> Any:
    """A dtype description read back from JSON (fields are tuples in the ``.npy`` format)."""
    if isinstance(descr, str):
        return descr
    if not isinstance(descr, list):
        raise WireError(f"an array's dtype is described as {descr!r}")
    fields = []
    for field in descr:
        if not isinstance(field, list) or len(field) not in (2, 3):
            raise WireError(f"an array's dtype field is described as {field!r}")
        name, inner = field[0], _descr_in(field[1])
        fields.append((name, inner) if len(field) == 2 else (name, inner, tuple(field[2])))
    return fields


def _encode(value: Any, arrays: list[np.ndarray], where: str) -> Any:
    """``value`` as a JSON tree, its arrays appended to ``arrays``."""
    if value is None or isinstance(value, bool | str | int | float):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise WireError(f"{where} is an array of Python objects, which cannot be sent")
        arrays.append(np.ascontiguousarray(value))
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, np.generic):
        return _encode(value.item(), arrays, where)
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise WireError(f"{where} is a table whose keys are not all strings")
        return {_TABLE: {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    raise WireError(
        f"{where} is a {type(value).__name__}; only arrays, numbers, strings, booleans, None, "
        "lists and tables can be sent"
    )


def _decode(tree: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(tree, list):
        return [_decode(v, arrays) for v in tree]
    if isinstance(tree, dict):
        if set(tree) == {_ARRAY} and isinstance(tree[_ARRAY], int):
            if not 0 <= tree[_ARRAY] < len(arrays):
                raise WireError(f"a message names array {tree[_ARRAY]} it does not hold")
            return arrays[tree[_ARRAY]]
        if set(tree) == {_TABLE} and isinstance(tree[_TABLE], dict):
            return {k: _decode(v, arrays) for k, v in tree[_TABLE].items()}
        raise WireError(f"a message holds a table of unknown form (keys {sorted(tree)[:3]})")
    return tree


def _array_header(array: np.ndarray) -> dict[str, Any]:
    return {
        "dtype": np.lib.format.dtype_to_descr(array.dtype),
        "shape": list(array.shape),
        "nbytes": int(array.nbytes),
    }


def _header(frame: memoryview) -> dict[str, Any]:
    """The JSON header at the start of a frame."""
    if len(frame) < _LENGTH.size or _LENGTH.unpack_from(frame)[0] > len(frame) - _LENGTH.size:
        raise WireError("a message is shorter than its header")
    end = _LENGTH.size + _LENGTH.unpack_from(frame)[0]
    try:
        header = json.loads(bytes(frame[_LENGTH.size : end]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"a message header is unreadable ({exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise WireError("a message header is not a table with a list of arrays")
    return header


def _array_from(header: Any, blob: memoryview) -> np.ndarray:
    try:
        dtype = np.lib.format.descr_to_dtype(_descr_in(header["dtype"]))
        shape = tuple(int(d) for d in header["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"an array header is malformed ({exc})") from None
    if dtype.hasobject or any(d < 0 for d in shape):
        raise WireError("an array header names Python objects or a negative size")
    if len(blob) != math.prod(shape) * dtype.itemsize:
        raise WireError(f"an array of shape {shape} and dtype {dtype} arrived as {len(blob)} bytes")
    if not blob:
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(blob, dtype=dtype).reshape(shape)  # a view of the frame, writable


def _padding(size: int) -> int:
    """Bytes after ``size`` bytes of a frame so that what follows is aligned."""
    return -size % _ALIGN


def _write_all(fd: int, parts: list[Any]) -> None:
    """Write every part, in order, in as few system calls as the pipe allows (no copy)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        written = os.writev(fd, views[:_MAX_PARTS])
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views and written:
            views[0] = views[0][written:]


def _read_into(fd: int, buffer: memoryview) -> None:
    """Fill ``buffer`` from ``fd``; :class:`EOFError` if the pipe ends first."""
    got = 0
    while got < len(buffer):
        n = os.readv(fd, [buffer[got:]])
        if n == 0:
            raise EOFError("the other side closed the channel")
        got += n


def _pwrite_all(fd: int, parts: list[Any]) -> None:
    """Write every part from the start of the file ``fd``."""
    offset = 0
    for part in parts:
        view = memoryview(part).cast("B")
        while len(view):
            written = os.pwrite(fd, view, offset)
            offset += written
            view = view[written:]


def _pread_into(fd: int, buffer: memoryview) -> None:
    """Fill ``buffer`` from the start of the file ``fd``."""
    got = 0
    while got < len(buffer):
        n = os.preadv(fd, [buffer[got:]], got)
        if n == 0:
            raise WireError("a spilled message is shorter than announced")
        got += n


def _spill_path(name: bytes) -> str:
    text = name.decode("ascii", "replace")
    if not _SPILL_NAME.fullmatch(text):
        raise WireError("a spilled message names no file of the channel")
    return os.path.join(_SPILL_DIR, text)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class SharedRegion:
    """Memory shared by the two sides for the frames one of them writes (a sealed ``memfd``:
    neither side can shrink or grow it, so reading it never faults)."""

    def __init__(self, fd: int, *, writable: bool) -> None:
        self.fd = fd
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self._map: mmap.mmap | None = mmap.mmap(fd, REGION_SIZE, mmap.MAP_SHARED, prot)
        self.view = np.frombuffer(self._map, dtype=np.uint8)

    def write(self, parts: list[Any]) -> None:
        """Write ``parts`` one after another from the start of the region."""
        offset = 0
        for part in parts:
            data = np.frombuffer(part, dtype=np.uint8)
            self.view[offset : offset + data.size] = data
            offset += data.size

    def copy(self, size: int) -> memoryview:
        """The first ``size`` bytes of the region, copied into memory of this process."""
        frame = np.empty(size, dtype=np.uint8)
        np.copyto(frame, self.view[:size])
        return frame.data

    def close(self) -> None:
        self.view = np.empty(0, dtype=np.uint8)
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a view still held: unmapped when freed
                self._map.close()
            self._map = None
        with contextlib.suppress(OSError):
            os.close(self.fd)


def shared_regions() -> tuple[int, int] | None:
    """Two sealed shared regions (descriptors, passed to the other side's process like its
    pipes), one per direction; None where the system has none (large frames then go through
    files in memory)."""
    make = getattr(os, "memfd_create", None)
    if make is None or fcntl is None or not hasattr(fcntl, "F_ADD_SEALS"):
        return None
    seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    made: list[int] = []
    try:
        for _ in range(2):
            fd = make("dpledger-wire", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            made.append(fd)
            os.ftruncate(fd, REGION_SIZE)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except OSError:
        for fd in made:
            os.close(fd)
        return None
    return made[0], made[1]


def _sealed(fd: int) -> bool:
    """Whether ``fd`` is a region of :data:`REGION_SIZE` bytes that no side can resize."""
    need = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW if fcntl is not None else 0
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS) if fcntl is not None else 0
        return seals & need == need and os.fstat(fd).st_size == REGION_SIZE
    except OSError:
        return False


class Link:
    """One side of the channel: the descriptors ``inbox`` to read and ``outbox`` to write.

    A frame is its length (8 bytes), the header's length (4 bytes), the JSON header, and the
    arrays' bytes, each aligned; it is written with one gathering call where the pipe allows
    and read straight into the buffer the arrays then live in. Sending a message and reading
    its answer are one step under a lock, so that threads of the same process never
    interleave their messages.

    ``regions`` are the shared regions (descriptors) this side reads and writes large frames
    in; a region that is not sealed to its size is not used."""

    def __init__(self, inbox: int, outbox: int, regions: tuple[int, int] | None = None) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.lock = threading.RLock()
        self._region_in: SharedRegion | None = None
        self._region_out: SharedRegion | None = None
        if regions is not None and all(_sealed(fd) for fd in regions):
            self._region_in = SharedRegion(regions[0], writable=False)
            self._region_out = SharedRegion(regions[1], writable=True)
        #: whether this side wrote a frame in its region and has received nothing since
        self._region_busy = False
        #: this side's spill file (descriptor, name), made at the first large message
        self._spill_out: tuple[int, bytes] | None = None
        #: the other side's spill files this side has read (name -> descriptor)
        self._spill_in: dict[bytes, int] = {}
        #: whether this side spilled a message and has received nothing since (then the other
        #: side may not have read it yet: the next large message takes a new file)
        self._spilled_unanswered = False
        #: spill files replaced that way (removed at close)
        self._spill_old: list[tuple[int, bytes]] = []

    def close(self) -> None:
        """Close both descriptors (the other side then reads the end of the channel) and
        remove the spill files, this side's and the other's (a killed process leaves its own)."""
        self.close_outbox()
        for name, fd in self._spill_in.items():
            os.close(fd)
            _remove(_spill_path(name))
        self._spill_in.clear()
        for region in (self._region_in, self._region_out):
            if region is not None:
                region.close()
        self._region_in = self._region_out = None
        if self.inbox >= 0:
            with contextlib.suppress(OSError):
                os.close(self.inbox)
            self.inbox = -1

    def close_outbox(self) -> None:
        """Close the writing end only (a side waiting for a message then ends), and remove
        this side's spill file."""
        for fd, name in [*self._spill_old, *([self._spill_out] if self._spill_out else [])]:
            os.close(fd)
            _remove(_spill_path(name))
        self._spill_out = None
        self._spill_old.clear()
        if self.outbox >= 0:
            with contextlib.suppress(OSError):
                os.close(self.outbox)
            self.outbox = -1

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one message (a table) as one frame."""
        arrays: list[np.ndarray] = []
        tree = _encode(dict(message), arrays, "the message")
        header = {"tree": tree, "arrays": [_array_header(a) for a in arrays]}
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        head = _LENGTH.size + len(text)
        parts: list[Any] = [_LENGTH.pack(len(text)), text, bytes(_padding(head))]
        size = head + _padding(head)
        for array in arrays:
            parts += [array.reshape(-1).view(np.uint8), bytes(_padding(array.nbytes))]
            size += array.nbytes + _padding(array.nbytes)
        with self.lock:
            region = self._region_out
            # the region, unless the other side may not have read the last frame in it yet
            if SPILL_ABOVE < size <= REGION_SIZE and region is not None and not self._region_busy:
                self._region_busy = True
                region.write(parts)
                _write_all(self.outbox, [_FRAME.pack(size | _SHARED)])
                return
            if size > SPILL_ABOVE:
                fd, name = self._spill_file()
                _pwrite_all(fd, parts)
                _write_all(self.outbox, [_FRAME.pack(size | _SPILLED), name])
            else:
                _write_all(self.outbox, [_FRAME.pack(size), *parts])

    def _spill_file(self) -> tuple[int, bytes]:
        """This side's spill file, written from its start for each large message (the
        other side has read it when it answers; until then a new file is taken)."""
        if self._spilled_unanswered and self._spill_out is not None:
            self._spill_old.append(self._spill_out)
            self._spill_out = None
        self._spilled_unanswered = True
        if self._spill_out is None:
            name = f"dpledger-wire-{uuid.uuid4().hex}".encode("ascii")
            flags = os.O_CREAT | os.O_EXCL | os.O_RDWR
            self._spill_out = (os.open(_spill_path(name), flags, 0o600), name)
        return self._spill_out

    def _spilled_from(self, name: bytes) -> int:
        """The other side's spill file ``name`` (opened once)."""
        if name not in self._spill_in:
            try:
                self._spill_in[name] = os.open(_spill_path(name), os.O_RDONLY)
            except OSError as exc:
                raise WireError(f"a spilled message cannot be read ({exc.strerror})") from None
        return self._spill_in[name]

    def poll(self, timeout: float | None) -> bool:
        """Whether a message (or the end of the channel) arrives within ``timeout`` seconds."""
        return bool(select.select([self.inbox], [], [], timeout)[0])

    def receive(self) -> dict[str, Any]:
        """Read one message; :class:`EOFError` if the other side has closed its end."""
        with self.lock:
            self._spilled_unanswered = self._region_busy = False
            prefix = bytearray(_FRAME.size)
            _read_into(self.inbox, memoryview(prefix))
            size = _FRAME.unpack(prefix)[0]
            spilled, shared = bool(size & _SPILLED), bool(size & _SHARED)
            size &= ~(_SPILLED | _SHARED)
            if size > MAX_FRAME or (shared and spilled):
                raise WireError(f"a message of {size} bytes is announced")
            if shared:
                if self._region_in is None or size > REGION_SIZE:
                    raise WireError("a message names a shared region the channel does not have")
                frame = self._region_in.copy(size)
            else:
                frame = np.empty(size, dtype=np.uint8).data
            if spilled:
                name = bytearray(_SPILL_NAME_BYTES)
                _read_into(self.inbox, memoryview(name))
                _pread_into(self._spilled_from(bytes(name)), frame)
            elif not shared:
                _read_into(self.inbox, frame)
        header = _header(frame)
        offset = _LENGTH.size + _LENGTH.unpack_from(frame)[0]
        offset += _padding(offset)
        arrays = []
        for info in header["arrays"]:
            nbytes = info.get("nbytes") if isinstance(info, dict) else None
            if not isinstance(nbytes, int) or not 0 <= nbytes <= len(frame) - offset:
                raise WireError("an array's size does not fit the message")
            arrays.append(_array_from(info, frame[offset : offset + nbytes]))
            offset += nbytes + _padding(nbytes)
        if offset != len(frame):
            raise WireError("a message is longer than its header says")
        message = _decode(header.get("tree"), arrays)
        if not isinstance(message, dict):
            raise WireError("a message is not a table")
        return message

    def ask(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` and read the answer, as one step."""
        with self.lock:
            self.send(message)
            return self.receive()
