"""Axolotl's functions swapped for fastaxo's (module and class attributes: Axolotl's callers
look them up at call time), each checked against the signature fastaxo replaces, and put
back: :func:`patch_axolotl`, :func:`unpatch_axolotl`, :func:`patched`."""

from __future__ import annotations

import contextlib
from typing import Any

from fastaxo.integrations.axolotl.chat import make_tokenize_prompt
from fastaxo.integrations.axolotl.chat_queue import make_tokenize_with_work_queue
from fastaxo.integrations.axolotl.dedupe import make_deduplicate_dataset
from fastaxo.integrations.axolotl.filters import make_drop_outside_range
from fastaxo.integrations.axolotl.packer import make_generate_batches, make_pack_parallel
from fastaxo.integrations.axolotl.prepacked import make_is_tokenized
from fastaxo.integrations.axolotl.settings import Settings, say_once, use
from fastaxo.integrations.axolotl.text import (
    make_completion_tokenize_prompt,
    make_encode_streaming,
    make_pretrain_tokenize_prompt,
)

__all__ = ["INSTANCE_WRAPS", "instance_method", "patch_axolotl", "patched", "unpatch_axolotl"]

_TARGETS: dict[str, list[tuple[str, str, Any, tuple[str, ...]]]] = {
    "dedupe": [("axolotl.utils.data.utils", "_deduplicate_dataset", make_deduplicate_dataset,
                ("dataset", "seen_hashes"))],
    "packing": [("axolotl.utils.samplers.multipack", "pack_parallel", make_pack_parallel,
                 ("sequence_lengths", "bin_capacity", "group_size", "bin_size")),
                ("axolotl.utils.samplers.multipack", "MultipackBatchSampler.generate_batches",
                 make_generate_batches, ("self", "set_stats"))],
    "chat_template": [("axolotl.prompt_strategies.chat_template",
                       "ChatTemplateStrategy.tokenize_prompt", make_tokenize_prompt,
                       ("self", "prompt")),
                      ("axolotl.datasets", "tokenize_with_work_queue",
                       make_tokenize_with_work_queue,
                       ("prompt_tokenizer", "dataset", "num_proc", "keep_in_memory"))],
    "completion": [("axolotl.prompt_strategies.completion",
                    "CompletionPromptTokenizingStrategy.tokenize_prompt",
                    make_completion_tokenize_prompt, ("self", "prompt")),
                   ("axolotl.prompt_strategies.pretrain",
                    "PretrainTokenizationStrategy.tokenize_prompt",
                    make_pretrain_tokenize_prompt, ("self", "prompt")),
                   ("axolotl.utils.data.streaming", "encode_streaming", make_encode_streaming,
                    ("examples", "tokenizer", "max_tokens", "text_column", "concatenate"))],
    "length_filter": [("axolotl.utils.data.utils", "_drop_outside_range", make_drop_outside_range,
                       ("dataset", "max_len", "min_len", "raise_on_long", "filter_kwargs"))],
    # (on when the config lists a dataset fastaxo prepare packed)
    "prepacked": [("axolotl.utils.data.wrappers", "_is_dataset_already_tokenized",
                   make_is_tokenized, ("dataset",))],
}
# Methods wrapped on one object, not on their class (a plugin hook hands fastaxo the object):
# part -> (module, Class.method, the parameters the wrapper takes). The loader-health callback
# times one trainer's batch pulls; patching the class would time every trainer in the process.
INSTANCE_WRAPS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "health": [("transformers.trainer", "Trainer.get_batch_samples",
                 ("epoch_iterator", "num_batches", "device"))],
}
# Targets an older supported Axolotl does not have, and need not: 0.19 tokenizes with datasets'
# map over the (replaced) tokenize_prompt, 0.21 with its own work queue
_NEWER_ONLY = {"tokenize_with_work_queue"}
_originals: dict[tuple[str, str], tuple[Any, str, Any]] = {}
# Axolotl's own import cycle: `import axolotl.datasets` first fails (it reaches
# axolotl.utils.data, which imports axolotl.datasets back); importing this first does not.
_IMPORT_FIRST = {"axolotl.datasets": "axolotl.utils.data"}


def patch_axolotl(parts=("dedupe", "packing", "chat_template", "completion", "length_filter")
                  ) -> list[str]:
    """Replace Axolotl's functions for ``parts``; returns the parts replaced. A function whose
    signature is not the one fastaxo was built against is left alone (said once in the log)."""
    import importlib
    import inspect

    done = []
    for part in parts:
        ok = False
        for modname, attr, factory, params in _TARGETS[part]:
            if (part, attr) in _originals:
                ok = True
                continue
            try:
                if modname in _IMPORT_FIRST:
                    importlib.import_module(_IMPORT_FIRST[modname])
                owner = importlib.import_module(modname)
                *path, name = attr.split(".")
                for p in path:
                    owner = getattr(owner, p)
                fn = getattr(owner, name)
                names = list(inspect.signature(fn).parameters)
            except (ImportError, AttributeError, TypeError, ValueError) as exc:
                if attr not in _NEWER_ONLY:
                    say_once(f"missing-{attr}", f"{part}: {modname}.{attr} not found ({exc}); "
                             "Axolotl's own code stays")
                continue
            if names[: len(params)] != list(params):
                say_once(f"sig-{attr}", f"{part}: {modname}.{attr}{inspect.signature(fn)} is "
                         "not the signature fastaxo replaces; Axolotl's own code stays")
                continue
            _originals[(part, attr)] = (owner, name, fn)
            setattr(owner, name, factory(fn))
            ok = True
        if ok:
            done.append(part)
    return done


def unpatch_axolotl() -> None:
    """Put Axolotl's own functions back."""
    while _originals:
        _, (mod, attr, fn) = _originals.popitem()
        setattr(mod, attr, fn)


@contextlib.contextmanager
def patched(parts=("dedupe", "packing", "chat_template", "completion", "length_filter"),
            **settings: Any):
    """``with patched(): ...`` runs Axolotl with fastaxo's dedupe, packer, chat-template and
    completion/pretraining tokenization (``parts`` picks some), e.g. around a script that calls
    a strategy's ``tokenize_prompt`` itself."""
    old = use(Settings(**settings)) if settings else None
    patch_axolotl(parts)
    try:
        yield
    finally:
        unpatch_axolotl()
        if old is not None:
            use(old)


def instance_method(part: str, obj: Any, name: str) -> Any:
    """``obj``'s bound method ``name``, as :data:`INSTANCE_WRAPS` lists it for ``part``, when its
    parameters are the ones the wrapper takes; else None (said once: the object keeps its own
    method)."""
    import inspect

    listed = {attr.rsplit(".", 1)[1]: params for _, attr, params in INSTANCE_WRAPS[part]}
    fn = getattr(obj, name, None)
    try:
        names = tuple(inspect.signature(fn).parameters) if fn is not None else None
    except (TypeError, ValueError):
        names = None
    if names != listed[name]:
        say_once(f"sig-{part}-{name}", f"{part}: {type(obj).__name__}.{name} is not the method "
                 f"fastaxo wraps (parameters {names}, expected {listed[name]}); it stays as is")
        return None
    return fn
