"""What prepare reports: the counts every prepare report has (:class:`ReportCounts`, shared
with the Ray form) and :class:`PrepareReport`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from fastaxo._core.files import TempOutput

__all__ = ["PrepareReport", "ReportCounts"]


@dataclass
class ReportCounts:
    """The options and counts every prepare report has (the single-machine one and the Ray
    one); see :class:`PrepareReport` for what they mean."""

    inputs: list[str]
    output: str
    max_length: int
    strategy: str
    overflow: str
    attention: str
    pack_window: int
    dedupe: bool
    dedupe_columns: list[str] | None
    labels: bool
    tokenizer: str | None = None
    #: the output's layout ("standard" or "axolotl") and its columns' value types
    layout: str = "standard"
    columns: dict[str, str] | None = None
    #: the pad id whose run ends a row, dropped as padding (None: only an attention_mask's)
    pad_token_id: int | None = None

    #: with a tokenizer: what it did (TextTokenizer.settings: special tokens, EOS, the
    #: truncation/padding stored in tokenizer.json that was not applied, and the encoder:
    #: "encoder" fastaxo or hf, "encoder_detail" in words, "encoder_reason" why not fastaxo's)
    tokenizer_settings: dict[str, Any] | None = None
    #: where the output came from, as its metadata says (fastaxo.pipeline.provenance): the
    #: build, the options, the tokenizer's and template's SHA-256, each input's size and mtime
    provenance: dict[str, Any] | None = None
    eos_appended: int = 0
    rows_in: int = 0
    tokens_in: int = 0
    empty_rows: int = 0
    #: the input's padding, dropped: tokens its attention_mask marks as padding (a run of 0s
    #: at the start or the end of a row), and the rows that had any
    pad_tokens_dropped: int = 0
    padded_rows: int = 0
    #: rows over max_row_bytes left out (overflow "drop"); they never reach the tokenizer
    rows_too_large: int = 0
    duplicates: int = 0
    rows_packed: int = 0
    overlong: int = 0
    truncated: int = 0
    truncated_tokens: int = 0
    split: int = 0
    split_pieces: int = 0
    dropped: int = 0
    dropped_tokens: int = 0
    sequences_out: int = 0
    tokens_out: int = 0
    bins: int = 0
    lower_bound: int = 0
    efficiency: float = 0.0
    windows: int = 0
    row_groups: int = 0
    output_bytes: int = 0
    seconds: float = 0.0
    rows_per_s: float = 0.0
    tokens_per_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _padding_lines(self) -> list[str]:
        """The input's padding dropped, when there was any."""
        if not self.padded_rows:
            return []
        how = ("the input's attention_mask" if self.pad_token_id is None else
               f"the attention_mask, or a run of pad id {self.pad_token_id} ending a row")
        return [f"  input padding      {self.pad_tokens_dropped:,} pad tokens dropped from "
                f"{self.padded_rows:,} rows ({how})"]

    def _columns_lines(self) -> list[str]:
        """The output's layout and its columns' value types."""
        if not self.columns:
            return []
        cols = ", ".join(f"{k} {v}" for k, v in self.columns.items())
        how = ("a stock transformers model trains on it with use_cache=False; sequences by "
               "position_ids and seq_lengths" if self.layout == "standard"
               else "Axolotl's: sequences by the segment ids in attention_mask"
               if "attention_mask" in self.columns else "Axolotl's")
        return [f"  output columns     {cols} ({self.layout} layout: {how})"]

    def _build_lines(self) -> list[str]:
        """The build that wrote the output (a fallback or serial build said)."""
        from fastaxo.pipeline.provenance import describe_build

        b = (self.provenance or {}).get("build")
        return [f"  build              {describe_build(b)}"] if b else []

    def _tokenizer_lines(self) -> list[str]:
        s = self.tokenizer_settings
        if not s:
            return []
        if "chat_template" in s:  # the chat path (ChatTokenizer.settings)
            fb = s.get("fallback_rows") or {}
            opts = ", ".join(f"{k} {v}" for k, v in s.items()
                             if k not in ("file", "chat_template", "one_pass", "fallback_rows",
                                          "encoder", "encoder_detail", "encoder_reason",
                                          "tokenizer_snapshot", "tokenizer_snapshot_detail"))
            line = (f"  chat template      {s['file']} ({s['chat_template']}): Axolotl's "
                    f"chat_template masking{', ' + opts if opts else ''}; "
                    + (f"{sum(fb.values()):,} rows by Axolotl's algorithm ("
                       + "; ".join(f"{n:,} {r}" for r, n in fb.items()) + ")" if fb
                       else "every row in one pass"))
            lines = [line]
            if s.get("encoder_detail"):  # the ids' encoder (reports before it: none)
                lines.append(f"  encoder            {s['encoder_detail']}")
            if s.get("tokenizer_snapshot"):
                lines.append(f"  tokenizer snapshot {s['tokenizer_snapshot']}: "
                             f"{s['tokenizer_snapshot_detail']}")
            return lines
        line = (f"  tokenizer          {s['file']}: whole rows, special tokens "
                f"{'on' if s['add_special_tokens'] else 'off'}, "
                + (f"EOS {s['eos_token']!r} appended to {self.eos_appended:,} rows"
                   if s["append_eos"] else "no EOS appended"))
        if s.get("ignored_from_file"):
            line += f"; not applied from tokenizer.json: {s['ignored_from_file']}"
        lines = [line]
        if s.get("encoder_detail"):  # (reports written before the C encoder have none)
            lines.append(f"  encoder            {s['encoder_detail']}")
        return lines

    def to_json(self, path: str) -> None:
        """Write :meth:`as_dict` as JSON to ``path`` (a temporary file, renamed when complete)."""
        with TempOutput(path, "path") as tmp, open(tmp.path, "w") as fh:
            json.dump(self.as_dict(), fh, indent=2)
            fh.write("\n")

    def add_pack_stats(self, st: Any) -> None:
        """Count one packed window (its PackStats)."""
        self.windows += 1
        self.bins += st.bins
        self.tokens_out += st.tokens
        self.sequences_out += st.entries
        self.rows_packed += st.sequences
        for k in ("overlong", "truncated", "truncated_tokens", "split", "split_pieces", "dropped",
                  "dropped_tokens"):
            setattr(self, k, getattr(self, k) + getattr(st, k))

    def finish(self, seconds: float) -> None:
        """Wall time, rates, the lower bound and the efficiency, from the counts."""
        self.seconds = seconds
        self.lower_bound = -(-self.tokens_out // self.max_length)
        self.efficiency = self.tokens_out / (self.bins * self.max_length) if self.bins else 0.0
        self.rows_per_s = self.rows_in / seconds if seconds > 0 else 0.0
        self.tokens_per_s = self.tokens_in / seconds if seconds > 0 else 0.0


@dataclass
class PrepareReport(ReportCounts):
    """What :func:`prepare` did. Rows count input rows; ``duplicates`` are rows equal to an earlier
    row on the dedupe columns (dropped); ``overlong`` rows are longer than ``max_length`` (kept
    rows only) and were truncated / split / dropped as ``overflow`` says. ``pad_tokens_dropped``
    are the tokens the input's ``attention_mask`` marks as padding (a run of 0s at a row's start or
    end), never packed, in ``padded_rows`` rows. ``empty_files`` of the ``files`` inputs held no
    rows (JSON Lines of only whitespace) and were skipped. ``efficiency`` = tokens_out / (bins x
    max_length); no packing can use fewer than ``lower_bound`` = ceil(tokens_out / max_length)
    bins. ``reader_wait_seconds`` is the time the pipeline waited for the reader's next batch (the
    rest runs in the caller's thread: tokenize, dedupe, pack, write); ``bytes_read`` what the
    process read through read calls while reading (``/proc/self/io`` rchar), ``bytes_decoded`` the
    Arrow size of the batches; ``peak_rss_bytes`` the peak resident memory during the call (VmHWM,
    reset when the call starts; on a kernel that cannot reset it, the process's peak so far)."""

    files: int = 0
    empty_files: int = 0
    reader_wait_seconds: float = 0.0
    tokenize_seconds: float = 0.0
    dedupe_seconds: float = 0.0
    pack_seconds: float = 0.0
    write_seconds: float = 0.0
    bytes_read: int | None = None
    bytes_decoded: int = 0
    peak_rss_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        mib = lambda v: "n/a" if v is None else f"{v / 2**20:,.0f} MiB"  # noqa: E731
        pct = lambda a, b: f"{100 * a / b:.2f}%" if b else "0%"  # noqa: E731
        over = f"{self.overlong:,} longer than {self.max_length:,}"
        if self.overlong and self.strategy != "wrapped":
            what = {"truncate": f"truncated (-{self.truncated_tokens:,} tokens)",
                    "split": f"split into {self.split_pieces:,} pieces",
                    "drop": f"dropped (-{self.dropped_tokens:,} tokens)"
                    }.get(self.overflow, self.overflow)
            over += f": {what}"
        if self.strategy == "wrapped":  # (every document is cut where a row ends)
            over += (f"; {self.split:,} documents run on into the next row "
                     f"({self.split_pieces:,} pieces)")
        extra_bins = self.bins - self.lower_bound
        lines = [
            f"fastaxo prepare: {self.files} file(s)"
            + (f" ({self.empty_files} with no rows, skipped)" if self.empty_files else "")
            + f" -> {self.output}",
            f"  rows in            {self.rows_in:,} ({self.tokens_in:,} tokens)",
            f"  duplicates dropped {self.duplicates:,} ({pct(self.duplicates, self.rows_in)})"
            + ("" if self.dedupe else " [dedupe off]")
            + (f"; empty rows left out {self.empty_rows:,}" if self.empty_rows else "")
            + (f"; rows over max_row_bytes left out {self.rows_too_large:,}"
               if self.rows_too_large else ""),
            *self._padding_lines(),
            f"  over-long rows     {over}",
            *self._tokenizer_lines(),
            f"  packed             {self.rows_packed:,} rows ({self.sequences_out:,} sequences, "
            f"{self.tokens_out:,} tokens) -> {self.bins:,} bins of {self.max_length:,} "
            f"({self.strategy}, windows of {self.pack_window:,} rows)",
            f"  efficiency         {self.efficiency:.4%} of the bins' tokens used; lower bound "
            f"{self.lower_bound:,} bins (+{extra_bins:,}, {pct(extra_bins, self.lower_bound)})",
            *self._columns_lines(),
            *self._build_lines(),
            f"  time               {self.seconds:.2f} s: {self.rows_per_s:,.0f} rows/s, "
            f"{self.tokens_per_s:,.0f} tokens/s",
            f"  stages             waited on the reader {self.reader_wait_seconds:.2f} s, "
            + (f"tokenize {self.tokenize_seconds:.2f} s, " if self.tokenizer else "")
            + f"dedupe {self.dedupe_seconds:.2f} s, pack {self.pack_seconds:.2f} s, "
            f"write {self.write_seconds:.2f} s",
            f"  memory and I/O     peak RSS {mib(self.peak_rss_bytes)}; read "
            f"{mib(self.bytes_read)} (decoded {mib(self.bytes_decoded)}); wrote "
            f"{mib(self.output_bytes)} in {self.row_groups:,} row groups",
        ]
        return "\n".join(lines)
