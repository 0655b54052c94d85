"""Chat-template tokenization with Axolotl's output (``type: chat_template``): a whole batch
of conversations rendered, tokenized and role-masked in one pass (:class:`ChatEngine`), the
configuration in :class:`ChatSpec`, and :func:`tokenize_chat` for scripts, which also covers
the rows the one-pass path cannot prove (with Axolotl's own algorithm, counted)."""

from fastaxo.chat.engine import ChatEngine, Fallback
from fastaxo.chat.spec import ChatSpec
from fastaxo.chat.tokenize import ChatResult, tokenize_chat

__all__ = ["ChatEngine", "ChatResult", "ChatSpec", "Fallback", "tokenize_chat"]
