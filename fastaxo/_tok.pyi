"""Private tokenizer kernels (fastaxo._tok): for now the Unicode layer's test hooks."""

UNICODE_VERSION: str
NFC_UNICODE_VERSION: str
UC_L: int
UC_N: int
UC_WS: int
UC_M: int
UC_CRLF: int

def _uclass_all() -> bytes: ...
def _nfc_is_quick(s: str) -> bool: ...
def _nfc_utf8(b: bytes, offsets: bool = ...) -> tuple[bytes, list[int] | None]: ...
def _nfc(s: str) -> tuple[str, list[int]]: ...
