/* fx_json: how deep the lines of a JSON Lines block nest, found before a recursive parser
 * meets them.
 *
 * pyarrow's JSON reader parses a value recursively: a row nested about 20,000 deep overflows
 * an 8 MiB thread stack (SIGSEGV, the process dies), and its type inference takes seconds per
 * block for one nested a thousand deep. fx_json_too_deep finds the first line of a block that
 * nests deeper than a limit, in one pass over the bytes: O(n), no allocation, no state but
 * two constant tables, safe to call from many threads.
 *
 * The rules (fastaxo/_reference/text.py, the NumPy twin, follows them exactly):
 * - every '\n' ends a line and restarts the state (JSON Lines has no newline inside values);
 * - a byte preceded on its line by an odd run of '\\' is escaped, and inert;
 * - an unescaped '"' opens or closes a string;
 * - outside strings an unescaped '[' or '{' adds one to the depth, ']' or '}' takes one away
 *   (not clamped at 0: a line with an unmatched closer is invalid JSON, refused by the parser
 *   before it nests any deeper);
 * - a line is too deep when its depth exceeds `limit` at some byte.
 * For valid JSON the depth is the nesting depth of the value; for invalid JSON it is, up to
 * the first error, the depth the parser has recursed to.
 */
#ifndef FX_JSON_H
#define FX_JSON_H

#include <stdint.h>

/* The 0-based index of the first line of p[0..n) deeper than `limit` (>= 0), or -1. */
int64_t fx_json_too_deep(const uint8_t *p, int64_t n, int64_t limit);

#endif
