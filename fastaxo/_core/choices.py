"""The choices of fastaxo's options, in one place: the library checks its arguments against
these, and the CLI offers them (this module imports nothing, so the CLI starts light)."""

__all__ = ["ATTENTION", "OVERFLOW_MODES", "PREPARE_LAYOUTS", "PREPARE_STRATEGIES", "STRATEGIES",
           "TRAIN_OPTIONS"]

#: bin packing: best-fit decreasing, first-fit decreasing, first-fit, next-fit
STRATEGIES = ("bfd", "ffd", "ff", "nf")
#: prepare's: the bin packers, and "wrapped" (documents back to back, cut every max_length)
PREPARE_STRATEGIES = (*STRATEGIES, "wrapped")
#: rows longer than max_length ("isolate": pack_bins only, a bin of its own)
OVERFLOW_MODES = ("error", "truncate", "split", "drop", "isolate")
#: attention_mask layouts of pack and prepare (None / "none": no mask)
ATTENTION = ("segments", "ones")
#: prepare's output: "standard" (input_ids, labels, position_ids, seq_lengths: what a stock
#: transformers model trains on) or "axolotl" (segment ids in attention_mask, Axolotl's)
PREPARE_LAYOUTS = ("standard", "axolotl")
#: Axolotl's train_on_eos / train_on_eot
TRAIN_OPTIONS = ("turn", "all", "last", "none")
