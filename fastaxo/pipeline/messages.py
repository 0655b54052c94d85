"""A messages column in Arrow: a clean list<struct<role, content>> column read as
conversations without making every row's Python objects at once (:class:`ArrowTurns`), the
UTF-8 size of each row's contents from the buffers, the rows as Python objects but some, and
Axolotl's message field mappings (ShareGPT's ``from`` / ``value``) applied to a column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow

__all__ = ["ArrowTurns", "arrow_turns", "content_bytes", "message_fields", "pylist_without",
           "rename_message_fields"]


def pylist_without(arr: pa.Array, skip: np.ndarray) -> list[Any]:
    """``arr.to_pylist()`` with None at the indices ``skip``, which never become Python objects
    (a row over max_row_bytes can be hundreds of MB)."""
    if not len(skip):
        return arr.to_pylist()
    keep = np.ones(len(arr), bool)
    keep[skip] = False
    got: list[Any] = [None] * len(arr)
    for i, v in zip(np.flatnonzero(keep).tolist(), arr.filter(pa.array(keep)).to_pylist(),
                    strict=True):
        got[i] = v
    return got


def _flat(arr: pa.Array, offs: np.ndarray) -> pa.Array:
    """``arr.flatten()`` (the values its rows span) without pyarrow.compute, whose import is
    ~70 ms of a chat prepare, where no row is null (a null row may span values it hides)."""
    if arr.null_count:
        return arr.flatten()
    return arr.values.slice(int(offs[0]), int(offs[-1]) - int(offs[0]))


def arrow_turns(arr: pa.Array) -> ArrowTurns | None:
    """The conversations of a list<struct<role, content, ...>> column as
    :func:`fastaxo.chat.tokenize.normalize_messages` makes them, from two flat columns (no
    Python object per row and field to check); None where a row is not plainly that (another
    shape, a null message, role or content, another field set, an empty conversation): the
    row-by-row path then makes them, or names the row it refuses. (Arrow's strings are
    UTF-8: no lone surrogate to look for.) The Python objects are made as the rows are read
    (:class:`ArrowTurns`)."""
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        return None
    item = arr.type.value_type
    if (not pa.types.is_struct(item) or item.get_field_index("role") < 0
            or item.get_field_index("content") < 0):
        return None
    if not all(pa.types.is_string(item.field(f).type) or pa.types.is_large_string(
            item.field(f).type) for f in ("role", "content")):
        return None
    offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type))
    flat = _flat(arr, offs)
    if flat.null_count:
        return None
    # the children as the flattened rows see them (no struct is null: nothing to mask)
    fields = {item.field(k).name: flat.field(k) for k in range(item.num_fields)}
    if any(col.null_count != (0 if name in ("role", "content") else len(col))
           for name, col in fields.items()):
        return None
    if len(offs) > 1 and int(np.diff(offs).min()) == 0:
        return None
    return ArrowTurns(fields["role"], fields["content"], (offs - offs[0]).tolist())


class ArrowTurns(Sequence[list[dict[str, Any]]]):
    """The conversations of a clean messages column (:func:`arrow_turns`), each a list of
    ``{"role", "content"}`` dicts, made BLOCK rows at a time when a row of the block is first
    read; the KEEP blocks made last are kept (a row read again after is made again). The
    engine reads part by part: the rows are made on its render thread while the encoder
    works, and a part's objects (~3x its text) go once later parts are read."""

    BLOCK = 64
    KEEP = 8  # blocks: more than one part of the engine (chat.parts.PART_ROWS)

    def __init__(self, roles: pa.Array, contents: pa.Array, at: list[int]):
        self._roles, self._contents, self._at = roles, contents, at
        self._blocks: dict[int, list[list[dict[str, Any]]]] = {}
        self._utf8: tuple[np.ndarray, np.ndarray] | None = None  # (values, int64 offsets)

    def __len__(self) -> int:
        return len(self._at) - 1

    @overload
    def __getitem__(self, i: int) -> list[dict[str, Any]]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[dict[str, Any]]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("conversation index out of range")
        i %= n
        b = i // self.BLOCK
        block = self._blocks.get(b)
        if block is None:
            if len(self._blocks) >= self.KEEP:
                del self._blocks[next(iter(self._blocks))]
            block = self._blocks[b] = self._make(b * self.BLOCK, min(n, (b + 1) * self.BLOCK))
        return block[i - b * self.BLOCK]

    def _make(self, r0: int, r1: int) -> list[list[dict[str, Any]]]:
        at = self._at
        m0, m1 = at[r0], at[r1]
        try:
            roles = self._role_names(m0, m1)
            contents = self._contents.slice(m0, m1 - m0).to_pylist()
        except UnicodeDecodeError:  # (Arrow's JSON reader keeps such bytes): name the message
            raise self._not_utf8(m0, m1) from None
        messages = [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)]
        return [messages[at[k] - m0:at[k + 1] - m0] for k in range(r0, r1)]

    def utf8_rows(self, r0: int, r1: int
                  ) -> tuple[list[tuple[str, ...]], list[list[bytes]]] | None:
        """Rows ``r0..r1`` as their roles (the names :meth:`__getitem__` gives) and each
        content's UTF-8, without a str or dict per message (the chat engine's UTF-8 rows,
        :mod:`fastaxo.chat.utf8rows`); None where one of them is not UTF-8 (reading the
        rows names it) or the tokenizer extension is not built."""
        from fastaxo._core import backend

        if backend.tok_ext is None:
            return None
        at = self._at
        m0, m1 = at[r0], at[r1]
        if self._utf8 is None:
            buf = self._contents.buffers()[2]
            self._utf8 = (np.frombuffer(buf if buf is not None else b"", np.uint8),
                          arrow.offsets_of(self._contents, pa.types.is_large_string(
                              self._contents.type)).astype(np.int64))
        got = backend.tok_ext.utf8_split(*self._utf8, m0, m1)
        if type(got) is int:
            return None
        try:
            roles = self._role_names(m0, m1)
        except UnicodeDecodeError:
            return None
        return ([tuple(roles[at[k] - m0:at[k + 1] - m0]) for k in range(r0, r1)],
                [got[at[k] - m0:at[k + 1] - m0] for k in range(r0, r1)])

    def _role_names(self, m0: int, m1: int) -> list[str]:
        """Messages ``m0..m1``'s roles under Axolotl's names (``human`` is ``user``); raises
        UnicodeDecodeError for a role that is not UTF-8."""
        from fastaxo.chat.tokenize import ROLE_NAMES

        roles = self._roles.slice(m0, m1 - m0).to_pylist()
        names = {r: ROLE_NAMES.get(r, r) for r in set(roles)}
        return [names[r] for r in roles]

    def _not_utf8(self, m0: int, m1: int) -> Exception:
        """The error for the first message in [m0, m1) whose role or content is not UTF-8,
        naming its row as the chat path's errors do ("messages: row R message M ...")."""
        import bisect

        from fastaxo.errors import InvalidInputError

        bad = [(got[0], name, got[1]) for name, col in (("role", self._roles),
                                                         ("content", self._contents))
               if (got := arrow.first_not_utf8(col.slice(m0, m1 - m0))) is not None]
        if not bad:  # pragma: no cover - to_pylist raised for one of them
            return InvalidInputError("messages: a message is not UTF-8 text")
        k, name, e = min(bad, key=lambda b: b[0])  # (the role first where both are bad)
        m = m0 + k
        r = bisect.bisect_right(self._at, m) - 1
        return InvalidInputError(
            f"messages: row {r} message {m - self._at[r]} {name} is not UTF-8 text "
            f"(byte 0x{e.object[e.start]:02x} at offset {e.start:,}); a tokenizer takes text")

def content_bytes(arr: pa.Array) -> np.ndarray | None:
    """Per conversation of the list<struct> column ``arr``, the UTF-8 bytes of its messages'
    ``content`` (:func:`fastaxo.chat.tokenize.content_bytes` on Arrow buffers); None where the
    column has another shape (then the rows are checked once they are Python objects)."""
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        return None
    item = arr.type.value_type
    if not pa.types.is_struct(item) or item.get_field_index("content") < 0:
        return None
    ctype = item.field("content").type
    if not (pa.types.is_string(ctype) or pa.types.is_large_string(ctype)):
        return None
    # From the buffers (np.asarray(Array) imports pandas, 0.5 s; pyarrow.compute ~70 ms).
    offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type)).astype(np.int64)
    flat = _flat(arr, offs)
    content = flat.field("content")
    sizes = np.diff(arrow.offsets_of(content, pa.types.is_large_string(ctype))).astype(np.int64)
    for a in (flat, content):  # a null message or content holds no bytes (refused later)
        if a.null_count:
            bits = np.unpackbits(np.frombuffer(a.buffers()[0], np.uint8), bitorder="little")
            sizes[~bits[a.offset:a.offset + len(a)].astype(bool)] = 0
    cum = np.concatenate(([0], np.cumsum(sizes)))
    offs -= offs[0]
    return cum[offs[1:]] - cum[offs[:-1]]


def message_fields(options: dict[str, Any]) -> dict[str, str] | None:
    """The message fields to rename, ``{field in the data: "role" or "content"}``, from
    Axolotl's dataset keys in the chat ``options`` (taken out of them):
    ``message_property_mappings`` (``{"role": "from", "content": "value"}``: ShareGPT) or the
    older ``message_field_role`` / ``message_field_content``. None: the messages have ``role``
    and ``content`` already."""
    from fastaxo.errors import InvalidInputError

    mapping = options.pop("message_property_mappings", None) or {}
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise InvalidInputError("message_property_mappings: expected a mapping like "
                                f"{{'role': 'from', 'content': 'value'}}, got {mapping!r:.80}")
    mapping = dict(mapping)
    for key, ours in (("message_field_role", "role"), ("message_field_content", "content")):
        value = options.pop(key, None)
        if value is not None:
            if not isinstance(value, str) or not value:
                raise InvalidInputError(f"{key}: expected a field name, got {value!r:.80}")
            mapping[ours] = value
    extra = sorted(set(mapping) - {"role", "content"})
    if extra:
        raise InvalidInputError(
            f"message_property_mappings: maps {extra}; the chat path takes role and content "
            "only (tools, reasoning and per-message training are Axolotl's)")
    if len(set(mapping.values())) != len(mapping):
        raise InvalidInputError(f"message_property_mappings: {mapping} maps one field twice")
    return {src: ours for ours, src in mapping.items() if src != ours} or None


def rename_message_fields(arr: pa.Array, fields: dict[str, str], column: str) -> pa.Array:
    """The messages column ``arr`` with its messages' fields renamed (``fields``: the data's
    name -> ours). A list of structs is renamed in place (no row is made a Python object),
    JSON text row by row (parsed here and again by the chat path). A message without a field the
    mapping names is an error naming the column."""
    from fastaxo.errors import ColumnNotFoundError

    t = arr.type
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        item = t.value_type
        names = [item.field(i).name for i in range(item.num_fields)]
        missing = [f for f in fields if f not in names]
        clash = [fields[f] for f in fields if fields[f] in names and fields[f] not in fields]
        if missing or clash:
            raise ColumnNotFoundError(
                f"{column}: its messages have the fields {names}; the mapping "
                + (f"names {missing[0]!r}, which they lack" if missing else
                   f"renames a field to {clash[0]!r}, which they have already"))
        offs = arrow.offsets_of(arr, pa.types.is_large_list(t))
        flat = arr.values
        renamed = pa.StructArray.from_arrays(
            [flat.field(i) for i in range(item.num_fields)],
            fields=[item.field(i).with_name(fields.get(n, n)) for i, n in enumerate(names)],
            mask=None if flat.null_count == 0 else flat.is_null())
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(arrow.from_numpy(np.ascontiguousarray(offs)), renamed,
                               mask=None if arr.null_count == 0 else arr.is_null())
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return arr  # (another shape: the chat path refuses it, naming the row)
    import json

    # JSON text: each row's messages renamed and written back as JSON of the same type (\u
    # escapes kept: a lone surrogate stays text the chat path refuses, naming the row); a row
    # that is not a JSON list of objects is left as it is, for the chat path to name
    rows = []
    for text in arr.to_pylist():
        try:
            msgs = json.loads(text) if text is not None else None
        except ValueError:
            msgs = None
        if isinstance(msgs, list) and all(isinstance(m, dict) for m in msgs):
            text = json.dumps([{fields.get(k, k): v for k, v in m.items()} for m in msgs])
        rows.append(text)
    return pa.array(rows, type=t)
