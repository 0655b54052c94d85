/* fx_bpe: an exact byte-level BPE encoder (the tokenizer.json models of GPT-2, Llama 3 and
 * Qwen2/2.5/3), giving the ids Hugging Face `tokenizers` gives.
 *
 * Pipeline per text, in HF's order: split out the added tokens that are not "normalized"
 * (leftmost-longest, their single_word/lstrip/rstrip flags), then per segment between them:
 * NFC when the model has that normalizer, the same split for the "normalized" added tokens on
 * the normalized segment, then per piece left the pre-tokenizer (fx_pretok_next: the split
 * pattern, by hand), and per piece
 * byte-level BPE (lowest merge rank first, leftmost on ties; ignore_merges: a piece that is a
 * whole vocabulary entry is that entry). A BOS id, when given, starts every encoding made with
 * specials on (TemplateProcessing).
 *
 * The model (fx_bpe) is built once from flat arrays (fx_bpe_new) and is read-only afterwards:
 * any number of threads encode with it at once, each with its own fx_bpe_cache and fx_ids.
 * Time is linear in the text up to a log factor: a piece of any length merges through a heap.
 * No Python, no printing, no globals.
 */
#ifndef FX_BPE_H
#define FX_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "fx_status.h"

/* Statuses (fx_status.h): FX_OK; FX_EINVAL, a bad argument or model (the spec says which
 * check failed); FX_ENOMEM; FX_EBIG, more than INT32_MAX tokens or a text of 2^62 bytes or
 * more; FX_EUTF8, a text that is not valid UTF-8 (fx_bpe_encode_many, validate). */

/* The pre-tokenizer patterns (the Split regex of tokenizer.json, matched exactly). */
enum {
    FX_PRETOK_LLAMA3 = 0, /* ...|\p{N}{1,3}|...: Llama 3.x, cl100k */
    FX_PRETOK_QWEN2 = 1,  /* ...|\p{N}|...: Qwen2, 2.5, 3 */
    FX_PRETOK_GPT2 = 2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|...: ByteLevel use_regex */
    FX_PRETOK_NONE = 3    /* the whole segment is one piece */
};

/* Flags of an added token (tokenizer.json "added_tokens"), as HF's AddedVocabulary applies
 * them (tokenizers 0.23's added_vocabulary.rs find_matches). */
enum {
    FX_ADDED_LSTRIP = 1,      /* swallows the whitespace before it (not past the last token) */
    FX_ADDED_RSTRIP = 2,      /* swallows the whitespace after it */
    FX_ADDED_SPECIAL = 4,     /* a special token (kept in the text either way; informational) */
    FX_ADDED_SINGLE_WORD = 8, /* a match with a word character (\w, fx_uclass FX_UC_W) just
                               * before or after it is no match; the search goes on after it */
    FX_ADDED_NORMALIZED = 16  /* matched in the second pass: on each segment left by the
                               * others, after NFC (when nfc) */
};

typedef struct {
    /* vocabulary: token id i is the bytes tok_bytes[tok_off[i] .. tok_off[i+1]) (byte-level
     * decoded); an id that is not in the vocabulary has tok_off[i] == tok_off[i+1]. */
    int32_t n_vocab;
    const uint8_t *tok_bytes;
    const int64_t *tok_off;
    /* merges in rank order: merge r joins ids merges[3r] and merges[3r+1] into
     * merges[3r+2]. A pair listed twice takes its last rank (as HF's map does). */
    int32_t n_merges;
    const int32_t *merges;
    /* added tokens: content added_bytes[added_off[k] .. added_off[k+1]), id added_ids[k],
     * flags added_flags[k]. Those without FX_ADDED_NORMALIZED are matched on the raw text,
     * those with it on the normalized segments: their bytes must be the NFC of their content
     * when nfc (HF matches that; the loader normalizes them). Two tokens of one pass with the
     * same bytes: the first is matched. */
    int32_t n_added;
    const uint8_t *added_bytes;
    const int64_t *added_off;
    const int32_t *added_ids;
    const uint8_t *added_flags;
    int32_t pretok;        /* FX_PRETOK_* */
    int32_t ignore_merges; /* 1: a piece equal to a vocabulary entry is that entry */
    int32_t nfc;           /* 1: NFC each segment before pre-tokenizing */
    int32_t bos_id;        /* >= 0: prepended when specials are on; -1: none */
} fx_bpe_spec;

typedef struct fx_bpe fx_bpe;

/* A model from spec (whose arrays are copied: the caller may free them after). *status is
 * FX_OK, FX_EINVAL (what: a static string naming the check) or FX_ENOMEM. */
fx_bpe *fx_bpe_new(const fx_bpe_spec *spec, int *status, const char **what);
void fx_bpe_free(fx_bpe *m);

/* n_vocab of the spec the model was built from. */
int32_t fx_bpe_vocab_size(const fx_bpe *m);

/* How merging looks up a pair's rank: slot by slot (any C compiler; what builds for other
 * processors run, ARM's among them) or a bucket of slots at once with AVX2 (where the
 * processor has it). fx_bpe_new takes the best the build and the processor have. */
enum { FX_BPE_PROBE_PLAIN = 0, FX_BPE_PROBE_AVX2 = 1 };

/* A test hook: look up with `level` (FX_BPE_PROBE_*), or the best below it that the build and
 * the processor have. Returns the level in effect. Not while encoding. */
int fx_bpe_set_probe(fx_bpe *m, int level);

/* A word cache, and the scratch the NFC step needs: one per thread (two threads never share
 * one). NULL from fx_bpe_cache_new when out of memory. It begins at 5 MB and grows once to
 * 20 MB when a text's words do not fit (fx_bpe_int.h). */
typedef struct fx_bpe_cache fx_bpe_cache;
fx_bpe_cache *fx_bpe_cache_new(void);
void fx_bpe_cache_free(fx_bpe_cache *c);

/* A test hook: log2 of the cache's word slots and of its long-piece slots, and the count of
 * pieces merged because the cache did not hold them. */
void fx_bpe_cache_stats(const fx_bpe_cache *c, unsigned *bits, unsigned *long_bits,
                        uint64_t *merged);

/* What fx_ids.want_offsets asks for, per id (0 0 for the BOS):
 *   FX_OFFSETS_BYTES: its byte span [start, end) in the UTF-8 text given to fx_bpe_encode;
 *     the spans tile the text (a token holding part of a character spans the bytes it holds;
 *     where NFC changed the text, a span runs between the source offsets fx_nfc gives).
 *   FX_OFFSETS_CHARS: HF's Encoding.offsets (add_special_tokens aside): [start, end) in code
 *     points of the text. A token holding part of a character covers the whole character;
 *     where NFC changed the text, a token covers the input code points HF aligns its first
 *     and last code point to (fx_nfc's src_of), whole. Computed in the byte referential, then
 *     converted in one pass per text. */
enum { FX_OFFSETS_NONE = 0, FX_OFFSETS_BYTES = 1, FX_OFFSETS_CHARS = 2 };

/* Output: ids, and when want_offsets (FX_OFFSETS_*), per id its span. fx_bpe_encode appends.
 * Two ways to hold it:
 *   growable (fixed == 0): zero-initialise, reuse across calls, free with fx_ids_free;
 *   fixed (fixed == 1): ids / offsets point at caller memory of cap entries, never grown or
 *     freed here (a text of n bytes gives at most n ids, plus one BOS: size cap so).
 * An encode that would pass a fixed cap returns FX_EBIG. */
typedef struct {
    int32_t *ids;
    int64_t *offsets; /* 2 per id, when want_offsets (FX_OFFSETS_*) */
    int64_t n, cap;
    int want_offsets, fixed;
} fx_ids;
void fx_ids_free(fx_ids *out);

/* Append the ids of the UTF-8 text s[0..n) to out (invalid UTF-8 bytes are taken one by one
 * as punctuation; callers give valid text). with_specials: 1 adds the BOS (if any). */
int fx_bpe_encode(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *s, size_t n,
                  int with_specials, fx_ids *out);

/* Encode the texts data[off[i] - off[0] .. off[i+1] - off[0]) for i in [first, last) into the
 * fixed output *out (one id list after another), writing each text's id count to
 * counts[i - first]. validate: check each text is UTF-8 first (text from Arrow buffers may
 * not be; Python's str.encode always is): FX_EUTF8 otherwise. Stops at the first error
 * (its status returned, *bad = the text). */
int fx_bpe_encode_many(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *data,
                       const int64_t *off, int64_t first, int64_t last, int with_specials,
                       int validate, fx_ids *out, int64_t *counts, int64_t *bad);

/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
int fx_utf8_valid(const uint8_t *s, size_t n);

/* The end (exclusive) of the pre-token starting at byte i of seg[0..n) (i < n), for the
 * pattern `pretok` (FX_PRETOK_*). Exposed for tests. */
size_t fx_pretok_next(const uint8_t *seg, size_t n, size_t i, int pretok);

/* The ends of up to max pre-tokens from byte i of seg[0..n), one after another, into ends;
 * returns how many (0 only when i == n or max == 0). fx_pretok_next in a loop, in one call. */
size_t fx_pretok_split(const uint8_t *seg, size_t n, size_t i, int pretok, size_t *ends,
                       size_t max);

#endif /* FX_BPE_H */
