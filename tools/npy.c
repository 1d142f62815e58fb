/* npy.c: the .npy reader (header dict parser, size checks, byte swapping, Fortran-to-C
 * transposition), the .npy writer, and the NumPy-style array printer. */
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h> /* INFINITY and NAN only: no libm needed */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define NPY_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define NPY_PRINTF(fmt_index, args_index)
#endif

#define NPY_MAGIC     "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy pads the header so that the data starts on a multiple of 64 bytes (for mmap). */
#define NPY_ALIGN 64
/* NumPy leaves room after the dict for the first axis to grow in place to 21 digits, the length
 * of str(8 * 2**64 - 1); we write the same spaces so our files match NumPy's byte for byte. */
#define NPY_GROWTH_DIGITS 21
/* Longest descr and key strings we keep; anything longer is unsupported anyway. */
#define NPY_TOKEN_MAX 48

/* ---- helpers ------------------------------------------------------------------------------ */

/* Writes "name: message" into err and returns -1, so that failing reads as `return fail(...)`. */
NPY_PRINTF(4, 5)
static int fail(char* err, size_t err_size, const char* name, const char* fmt, ...) {
  if (err == NULL || err_size == 0) {
    return -1;
  }
  int n = snprintf(err, err_size, "%s: ", name);
  if (n >= 0 && (size_t)n < err_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, err_size - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* Python's repr of a tuple of ints: "()", "(3,)", "(2, 3)"; cut short if size is too small. */
static void format_shape(char* buf, size_t size, const int64_t* shape, int32_t ndim) {
  size_t len = (size_t)snprintf(buf, size, "(");
  for (int32_t i = 0; i < ndim && len < size; i++) {
    len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i > 0 ? ", " : "", shape[i]);
  }
  if (len < size) {
    snprintf(buf + len, size - len, "%s)", ndim == 1 ? "," : "");
  }
}

/* Sets *count to product(shape) and *nbytes to count * itemsize; -1 if a dimension is negative
 * or the product of the non-zero dimensions times itemsize exceeds both SIZE_MAX and INT64_MAX,
 * so that every partial product of the shape fits later index arithmetic too. */
static int array_size(const int64_t* shape, int32_t ndim, size_t itemsize, size_t* count,
                      size_t* nbytes) {
  const uint64_t limit =
      (uint64_t)SIZE_MAX < (uint64_t)INT64_MAX ? (uint64_t)SIZE_MAX : (uint64_t)INT64_MAX;
  uint64_t bytes = itemsize;
  int has_zero = 0;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      return -1;
    }
    if (shape[i] == 0) {
      has_zero = 1;
    } else if ((uint64_t)shape[i] > limit / bytes) {
      return -1;
    } else {
      bytes *= (uint64_t)shape[i];
    }
  }
  *nbytes = has_zero ? 0 : (size_t)bytes;
  *count = *nbytes / itemsize;
  return 0;
}

/* ---- dtypes ------------------------------------------------------------------------------- */

int pf_npy_dtype_descr(DLDataType dtype, char* buf, size_t size) {
  if (buf != NULL && size > 0) {
    buf[0] = '\0';
  }
  char kind = 0;
  int bits = dtype.bits;
  int ok_width = bits == 8 || bits == 16 || bits == 32 || bits == 64;
  switch (dtype.code) {
  case kDLInt:
    kind = 'i';
    break;
  case kDLUInt:
    kind = 'u';
    break;
  case kDLFloat:
    kind = 'f';
    ok_width = bits == 16 || bits == 32 || bits == 64;
    break;
  case kDLComplex:
    kind = 'c';
    ok_width = bits == 64 || bits == 128;
    break;
  case PF_NPY_DTYPE_CODE_BOOL:
    kind = 'b';
    ok_width = bits == 8;
    break;
  default:
    return -1;
  }
  if (!ok_width || dtype.lanes != 1 || buf == NULL) {
    return -1;
  }
  char order = bits == 8 ? '|' : host_is_little_endian() ? '<' : '>';
  int n = snprintf(buf, size, "%c%c%d", order, kind, bits / 8);
  if (n < 0 || (size_t)n >= size) {
    if (size > 0) {
      buf[0] = '\0';
    }
    return -1;
  }
  return 0;
}

/* Why a NumPy kind letter has no DLPack equivalent, for the error message; NULL if it may. */
static const char* unsupported_kind_reason(char kind) {
  switch (kind) {
  case 'O':
    return "object arrays hold Python objects";
  case 'S':
  case 'a':
    return "byte strings have no DLPack equivalent";
  case 'U':
    return "unicode strings have no DLPack equivalent";
  case 'V':
    return "void and structured dtypes have no DLPack equivalent";
  case 'M':
  case 'm':
    return "datetime and timedelta have no DLPack equivalent";
  default:
    return NULL;
  }
}

/* Parses a descr such as "<f4" into a DLPack dtype; *swap says whether the data is stored in
 * the other byte order than this host's. '<' is little-endian and '>' big-endian; '=' (native),
 * '|' (not applicable) and no order character at all mean this host's order, as in NumPy. */
static int parse_descr(const char* descr, DLDataType* dtype, int* swap, const char* name, char* err,
                       size_t err_size) {
  const char* p = descr;
  char order = '=';
  if (*p == '<' || *p == '>' || *p == '|' || *p == '=') {
    order = *p++;
  }
  char kind = *p != '\0' ? *p++ : '\0';
  int size = 0;
  int ndigits = 0;
  while (*p >= '0' && *p <= '9' && ndigits < 4) {
    size = size * 10 + (*p++ - '0');
    ndigits++;
  }
  const char* reason = unsupported_kind_reason(kind);
  if (reason != NULL) {
    return fail(err, err_size, name, "unsupported dtype '%s' (%s)", descr, reason);
  }
  int code = -1;
  if (*p == '\0' && ndigits > 0) {
    if (kind == 'b' && size == 1) {
      code = PF_NPY_DTYPE_CODE_BOOL;
    } else if ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) {
      code = kind == 'i' ? kDLInt : kDLUInt;
    } else if (kind == 'f' && (size == 2 || size == 4 || size == 8)) {
      code = kDLFloat;
    } else if (kind == 'c' && (size == 8 || size == 16)) {
      code = kDLComplex;
    }
  }
  if (code < 0) {
    return fail(err, err_size, name, "unsupported dtype '%s' (no DLPack equivalent)", descr);
  }
  dtype->code = (uint8_t)code;
  dtype->bits = (uint8_t)(size * 8);
  dtype->lanes = 1;
  int little = host_is_little_endian();
  *swap = size > 1 && ((order == '<' && !little) || (order == '>' && little));
  return 0;
}

/* ---- header dict -------------------------------------------------------------------------- */

/* The parsed header: what the dict said, validated. */
typedef struct {
  DLDataType dtype;
  int swap;          /* the data is in the other byte order than the host's */
  int fortran_order; /* the data is in Fortran order */
  int32_t ndim;
  int64_t shape[PF_NPY_MAX_NDIM];
} npy_header_t;

/* A cursor over the header text (not NUL-terminated) and where to report errors. */
typedef struct {
  const char* p;
  const char* end;
  const char* name;
  char* err;
  size_t err_size;
} header_cursor_t;

static int cursor_peek(const header_cursor_t* c) {
  return c->p < c->end ? (unsigned char)*c->p : -1;
}

static void cursor_skip_space(header_cursor_t* c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r' ||
                           *c->p == '\f' || *c->p == '\v')) {
    c->p++;
  }
}

/* The next word of the header (up to a space, ',' or '}'), for "got '...'" in messages. */
static const char* cursor_preview(const header_cursor_t* c, char* buf, size_t size) {
  size_t n = 0;
  const char* p = c->p;
  while (p < c->end && n + 1 < size && strchr(" \t\r\n,}", *p) == NULL) {
    unsigned char ch = (unsigned char)*p++;
    buf[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  buf[n] = '\0';
  if (n == 0) { /* a delimiter right away: show it */
    snprintf(buf, size, "%s", p >= c->end ? "end of header" : *p == '\n' ? "\\n" : "");
    if (buf[0] == '\0' && size > 1) {
      buf[0] = *p >= 0x20 && *p < 0x7f ? *p : '?';
      buf[1] = '\0';
    }
  }
  return buf;
}

/* Reads a quoted Python string literal into out (NUL-terminated, cut with "..." if longer than
 * size - 1); -1 if none starts here or it is not closed. */
static int cursor_read_string(header_cursor_t* c, char* out, size_t size) {
  int quote = cursor_peek(c);
  if (quote != '\'' && quote != '"') {
    return -1;
  }
  const char* p = c->p + 1;
  size_t n = 0;
  int cut = 0;
  while (p < c->end && *p != quote && *p != '\n') {
    char ch = *p++;
    if (ch == '\\' && p < c->end) {
      ch = *p++;
    }
    if (n + 1 < size) {
      out[n++] = ch;
    } else {
      cut = 1;
    }
  }
  if (p >= c->end || *p != quote) {
    return -1;
  }
  out[n] = '\0';
  if (cut && size > 4) {
    memcpy(out + size - 4, "...", 4);
  }
  c->p = p + 1;
  return 0;
}

static int cursor_read_bool(header_cursor_t* c, int* out) {
  static const char* const words[2] = {"False", "True"};
  for (int v = 0; v < 2; v++) {
    size_t len = strlen(words[v]);
    if ((size_t)(c->end - c->p) >= len && memcmp(c->p, words[v], len) == 0) {
      const char* after = c->p + len;
      int ch = after < c->end ? (unsigned char)*after : ' ';
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '_')) {
        c->p = after;
        *out = v;
        return 0;
      }
    }
  }
  char got[24];
  return fail(c->err, c->err_size, c->name, "'fortran_order' is not True or False: got '%s'",
              cursor_preview(c, got, sizeof got));
}

/* Reads a shape tuple: "()", "(3,)", "(2, 3)", "(2, 3,)"; Python 2's "3L" is accepted too. */
static int cursor_read_shape(header_cursor_t* c, npy_header_t* h) {
  char got[24];
  if (cursor_peek(c) != '(') {
    return fail(c->err, c->err_size, c->name, "'shape' is not a tuple of integers: got '%s'",
                cursor_preview(c, got, sizeof got));
  }
  c->p++;
  int32_t ndim = 0;
  int saw_comma = 0;
  for (;;) {
    cursor_skip_space(c);
    if (cursor_peek(c) == ')') {
      c->p++;
      break;
    }
    if (cursor_peek(c) == '-') {
      return fail(c->err, c->err_size, c->name, "shape has a negative dimension: '%s'",
                  cursor_preview(c, got, sizeof got));
    }
    if (cursor_peek(c) < '0' || cursor_peek(c) > '9') {
      return fail(c->err, c->err_size, c->name, "'shape' is not a tuple of integers: got '%s'",
                  cursor_preview(c, got, sizeof got));
    }
    int64_t dim = 0;
    while (cursor_peek(c) >= '0' && cursor_peek(c) <= '9') {
      int digit = *c->p++ - '0';
      if (dim > (INT64_MAX - digit) / 10) {
        return fail(c->err, c->err_size, c->name,
                    "shape dimension %d is too large (over 2**63 - 1)", (int)ndim);
      }
      dim = dim * 10 + digit;
    }
    if (cursor_peek(c) == 'L' || cursor_peek(c) == 'l') {
      c->p++; /* Python 2 long literal, as NumPy wrote under Python 2 */
    }
    if (ndim == PF_NPY_MAX_NDIM) {
      return fail(c->err, c->err_size, c->name, "shape has more than %d dimensions",
                  PF_NPY_MAX_NDIM);
    }
    h->shape[ndim++] = dim;
    cursor_skip_space(c);
    if (cursor_peek(c) == ',') {
      c->p++;
      saw_comma = 1;
    } else if (cursor_peek(c) == ')') {
      c->p++;
      if (ndim == 1 && !saw_comma) {
        return fail(c->err, c->err_size, c->name,
                    "'shape' (%" PRId64 ") is not a tuple: a 1-d shape is written (%" PRId64 ",)",
                    dim, dim);
      }
      break;
    } else {
      return fail(c->err, c->err_size, c->name, "'shape' is not a tuple of integers: got '%s'",
                  cursor_preview(c, got, sizeof got));
    }
  }
  h->ndim = ndim;
  return 0;
}

static int cursor_read_descr(header_cursor_t* c, npy_header_t* h) {
  char descr[NPY_TOKEN_MAX];
  char got[24];
  if (cursor_peek(c) == '[') {
    return fail(c->err, c->err_size, c->name,
                "unsupported dtype: structured (record) arrays have no DLPack equivalent");
  }
  if (cursor_read_string(c, descr, sizeof descr) != 0) {
    return fail(c->err, c->err_size, c->name, "'descr' is not a string: got '%s'",
                cursor_preview(c, got, sizeof got));
  }
  return parse_descr(descr, &h->dtype, &h->swap, c->name, c->err, c->err_size);
}

/* Parses the header dict, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
 * with the keys in any order, any whitespace, and an optional trailing comma. Like NumPy, it
 * requires exactly the three keys. */
static int parse_header(const char* text, size_t len, npy_header_t* h, const char* name, char* err,
                        size_t err_size) {
  header_cursor_t c = {text, text + len, name, err, err_size};
  int seen[3] = {0, 0, 0}; /* descr, fortran_order, shape */
  static const char* const keys[3] = {"descr", "fortran_order", "shape"};
  char got[24];
  memset(h, 0, sizeof *h);
  cursor_skip_space(&c);
  if (cursor_peek(&c) != '{') {
    return fail(err, err_size, name, "header is not a dict: it starts with '%s'",
                cursor_preview(&c, got, sizeof got));
  }
  c.p++;
  for (;;) {
    cursor_skip_space(&c);
    if (cursor_peek(&c) == '}') {
      c.p++;
      break;
    }
    char key[NPY_TOKEN_MAX];
    if (cursor_read_string(&c, key, sizeof key) != 0) {
      return fail(err, err_size, name, "header is not a dict: expected a quoted key, got '%s'",
                  cursor_preview(&c, got, sizeof got));
    }
    cursor_skip_space(&c);
    if (cursor_peek(&c) != ':') {
      return fail(err, err_size, name, "header is not a dict: expected ':' after '%s'", key);
    }
    c.p++;
    cursor_skip_space(&c);
    int k = 0;
    while (k < 3 && strcmp(key, keys[k]) != 0) {
      k++;
    }
    if (k == 3) {
      return fail(err, err_size, name, "header has an unexpected key '%s'", key);
    }
    if (seen[k]) {
      return fail(err, err_size, name, "header has the key '%s' twice", key);
    }
    seen[k] = 1;
    int rc = k == 0   ? cursor_read_descr(&c, h)
             : k == 1 ? cursor_read_bool(&c, &h->fortran_order)
                      : cursor_read_shape(&c, h);
    if (rc != 0) {
      return -1;
    }
    cursor_skip_space(&c);
    if (cursor_peek(&c) == ',') {
      c.p++;
    } else if (cursor_peek(&c) != '}') {
      return fail(err, err_size, name,
                  "header is not a dict: expected ',' or '}' after the value of '%s', got '%s'",
                  key, cursor_preview(&c, got, sizeof got));
    }
  }
  cursor_skip_space(&c);
  if (c.p != c.end) {
    return fail(err, err_size, name, "header has text after the dict: '%s'",
                cursor_preview(&c, got, sizeof got));
  }
  for (int k = 0; k < 3; k++) {
    if (!seen[k]) {
      return fail(err, err_size, name, "header has no '%s' key", keys[k]);
    }
  }
  return 0;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Where the bytes come from: an open file or a buffer. */
typedef struct {
  FILE* fp;
  const unsigned char* buf;
  size_t size;
  size_t pos;
} npy_source_t;

static size_t source_read(npy_source_t* s, void* dst, size_t n) {
  if (s->fp != NULL) {
    return fread(dst, 1, n, s->fp);
  }
  size_t left = s->size - s->pos;
  n = n < left ? n : left;
  if (n > 0) {
    memcpy(dst, s->buf + s->pos, n);
  }
  s->pos += n;
  return n;
}

/* Sets *left to the bytes not yet read; -1 when that cannot be known (a pipe), so that a
 * truncated file is reported before allocating what its header claims. */
static int source_left(npy_source_t* s, uint64_t* left) {
  if (s->fp == NULL) {
    *left = s->size - s->pos;
    return 0;
  }
  long here = ftell(s->fp);
  if (here < 0 || fseek(s->fp, 0, SEEK_END) != 0) {
    return -1;
  }
  long end = ftell(s->fp);
  if (fseek(s->fp, here, SEEK_SET) != 0 || end < here) {
    return -1;
  }
  *left = (uint64_t)(end - here);
  return 0;
}

/* Why fewer bytes than asked came: a read error, or the end of the data. */
static int short_read(npy_source_t* s, const char* what, size_t expected, size_t got,
                      const char* name, char* err, size_t err_size) {
  if (s->fp != NULL && ferror(s->fp)) {
    return fail(err, err_size, name, "read error: %s", strerror(errno));
  }
  return fail(err, err_size, name, "file is truncated: expected %zu bytes of %s, got %zu", expected,
              what, got);
}

/* Reverses the bytes of each of the `count` units of `unit` bytes at p. */
static void swap_bytes(unsigned char* p, size_t count, size_t unit) {
  for (size_t i = 0; i < count; i++, p += unit) {
    for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
  }
}

/* Copies `count` elements from Fortran order at src to C order at dst: walks dst in order and
 * keeps the matching src offset, which steps by the Fortran stride of the axis that moves. */
static void fortran_to_c(const unsigned char* src, unsigned char* dst, const int64_t* shape,
                         int32_t ndim, size_t itemsize, size_t count) {
  size_t stride[PF_NPY_MAX_NDIM];
  int64_t index[PF_NPY_MAX_NDIM] = {0};
  size_t s = 1;
  for (int32_t k = 0; k < ndim; k++) {
    stride[k] = s;
    s *= (size_t)shape[k];
  }
  size_t offset = 0;
  for (size_t n = 0; n < count; n++) {
    memcpy(dst + n * itemsize, src + offset * itemsize, itemsize);
    for (int32_t k = ndim - 1; k >= 0; k--) {
      if (++index[k] < shape[k]) {
        offset += stride[k];
        break;
      }
      offset -= (size_t)(shape[k] - 1) * stride[k];
      index[k] = 0;
    }
  }
}

static int read_npy(npy_source_t* src, const char* name, pf_npy_array_t* out, char* err,
                    size_t err_size) {
  unsigned char pre[12];
  size_t got = source_read(src, pre, 10);
  if (got == 0 && !(src->fp != NULL && ferror(src->fp))) {
    return fail(err, err_size, name, "file is empty: not a .npy file");
  }
  if (memcmp(pre, NPY_MAGIC, got < NPY_MAGIC_LEN ? got : NPY_MAGIC_LEN) != 0) {
    return fail(err, err_size, name, "not a .npy file: bad magic string");
  }
  if (got < 8) {
    return short_read(src, "preamble", 10, got, name, err, err_size);
  }
  int major = pre[6];
  int minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    return fail(err, err_size, name,
                "unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are known)", major, minor);
  }
  size_t preamble = major == 1 ? 10 : 12;
  if (got == 10 && preamble == 12) {
    got += source_read(src, pre + 10, 2);
  }
  if (got < preamble) {
    return short_read(src, "preamble", preamble, got, name, err, err_size);
  }
  uint32_t header_len = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
  if (preamble == 12) {
    header_len |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
  }
  if (header_len > PF_NPY_MAX_HEADER_LEN) {
    return fail(err, err_size, name, "header length %" PRIu32 " is over the limit of %d bytes",
                header_len, PF_NPY_MAX_HEADER_LEN);
  }
  char* text = malloc(header_len + 1u);
  if (text == NULL) {
    return fail(err, err_size, name, "out of memory reading the header");
  }
  got = source_read(src, text, header_len);
  npy_header_t h;
  int rc = got < header_len ? short_read(src, "header", header_len, got, name, err, err_size)
                            : parse_header(text, header_len, &h, name, err, err_size);
  free(text);
  if (rc != 0) {
    return -1;
  }

  size_t itemsize = h.dtype.bits / 8u;
  size_t count = 0;
  size_t nbytes = 0;
  if (array_size(h.shape, h.ndim, itemsize, &count, &nbytes) != 0) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    format_shape(shape, sizeof shape, h.shape, h.ndim);
    return fail(err, err_size, name, "shape %s is too large: its size in bytes overflows", shape);
  }
  uint64_t left = 0;
  int left_known = source_left(src, &left) == 0;
  if (left_known && left < nbytes) {
    return fail(err, err_size, name, "file is truncated: expected %zu bytes of data, got %" PRIu64,
                nbytes, left);
  }
  if (left_known && left > nbytes) {
    return fail(err, err_size, name,
                "expected %zu bytes of data, got %" PRIu64 " (one array per file)", nbytes, left);
  }
  unsigned char* data = malloc(nbytes > 0 ? nbytes : 1);
  if (data == NULL) {
    return fail(err, err_size, name, "out of memory: cannot allocate %zu bytes of data", nbytes);
  }
  got = source_read(src, data, nbytes);
  unsigned char extra;
  if (got < nbytes) {
    free(data);
    return short_read(src, "data", nbytes, got, name, err, err_size);
  }
  if (!left_known && source_read(src, &extra, 1) == 1) {
    free(data);
    return fail(err, err_size, name, "expected %zu bytes of data, got more (one array per file)",
                nbytes);
  }
  if (h.swap) {
    size_t unit = h.dtype.code == kDLComplex ? itemsize / 2 : itemsize;
    swap_bytes(data, nbytes / unit, unit);
  }
  if (h.fortran_order && h.ndim > 1 && count > 1) {
    unsigned char* c_order = malloc(nbytes);
    if (c_order == NULL) {
      free(data);
      return fail(err, err_size, name, "out of memory: cannot allocate %zu bytes of data", nbytes);
    }
    fortran_to_c(data, c_order, h.shape, h.ndim, itemsize, count);
    free(data);
    data = c_order;
  }
  out->dtype = h.dtype;
  out->ndim = h.ndim;
  memcpy(out->shape, h.shape, sizeof h.shape);
  out->fortran_order = 0; /* the data is now in C order, whatever the file said */
  out->data = data;
  out->nbytes = nbytes;
  return 0;
}

int pf_npy_read_buffer(const void* buf, size_t size, pf_npy_array_t* out, char* err,
                       size_t err_size) {
  const char* name = "<buffer>";
  if (out == NULL) {
    return fail(err, err_size, name, "output array is NULL");
  }
  memset(out, 0, sizeof *out);
  if (buf == NULL && size > 0) {
    return fail(err, err_size, name, "buffer is NULL");
  }
  npy_source_t src = {NULL, buf, size, 0};
  return read_npy(&src, name, out, err, err_size);
}

int pf_npy_read_file(const char* path, pf_npy_array_t* out, char* err, size_t err_size) {
  if (out != NULL) {
    memset(out, 0, sizeof *out);
  }
  if (path == NULL) {
    return fail(err, err_size, "pf_npy_read_file", "path is NULL");
  }
  if (out == NULL) {
    return fail(err, err_size, path, "output array is NULL");
  }
  FILE* fp = fopen(path, "rb");
  if (fp == NULL) {
    return fail(err, err_size, path, "cannot open: %s", strerror(errno));
  }
  npy_source_t src = {fp, NULL, 0, 0};
  int rc = read_npy(&src, path, out, err, err_size);
  fclose(fp);
  return rc;
}

void pf_npy_array_free(pf_npy_array_t* arr) {
  if (arr != NULL) {
    free(arr->data);
    memset(arr, 0, sizeof *arr);
  }
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Checks that arr describes itself consistently; writes its descr. */
static int check_array(const pf_npy_array_t* arr, char* descr, size_t descr_size, const char* name,
                       char* err, size_t err_size) {
  if (pf_npy_dtype_descr(arr->dtype, descr, descr_size) != 0) {
    return fail(err, err_size, name, "dtype (code %d, bits %d, lanes %d) has no .npy equivalent",
                arr->dtype.code, arr->dtype.bits, arr->dtype.lanes);
  }
  if (arr->ndim < 0 || arr->ndim > PF_NPY_MAX_NDIM) {
    return fail(err, err_size, name, "ndim is %d: expected 0 to %d", (int)arr->ndim,
                PF_NPY_MAX_NDIM);
  }
  size_t count = 0;
  size_t nbytes = 0;
  if (array_size(arr->shape, arr->ndim, arr->dtype.bits / 8u, &count, &nbytes) != 0) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    format_shape(shape, sizeof shape, arr->shape, arr->ndim);
    return fail(err, err_size, name, "shape %s is negative or too large", shape);
  }
  if (arr->nbytes != nbytes) {
    return fail(err, err_size, name, "nbytes is %zu, but the shape and dtype need %zu", arr->nbytes,
                nbytes);
  }
  if (arr->data == NULL && nbytes > 0) {
    return fail(err, err_size, name, "data is NULL");
  }
  if (arr->fortran_order) {
    return fail(err, err_size, name, "fortran_order is set: the data must be in C order");
  }
  return 0;
}

/* Writes NumPy's own header for a C-order array into buf: magic, version 1.0, length, the dict
 * with its keys sorted, spare spaces for growth, padding to NPY_ALIGN and a newline. Returns
 * its length, or 0 if buf is too small. (With at most 32 dimensions the header stays under a
 * kilobyte, far below version 1.0's 65535-byte limit, so version 2.0 is never needed.) */
static size_t build_header(char* buf, size_t size, const char* descr, const int64_t* shape,
                           int32_t ndim) {
  char shape_repr[PF_NPY_MAX_NDIM * 22 + 4];
  format_shape(shape_repr, sizeof shape_repr, shape, ndim);
  const size_t prefix = NPY_MAGIC_LEN + 4;
  int n = snprintf(buf + prefix, size > prefix ? size - prefix : 0,
                   "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape_repr);
  if (n < 0 || size <= prefix || (size_t)n >= size - prefix) {
    return 0;
  }
  size_t dict_len = (size_t)n;
  if (ndim > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%" PRId64, shape[0]);
    dict_len += NPY_GROWTH_DIGITS > digits ? (size_t)(NPY_GROWTH_DIGITS - digits) : 0;
  }
  size_t text_len = dict_len + 1; /* the newline */
  /* NumPy's rule, which pads a whole NPY_ALIGN when already aligned. */
  size_t pad = NPY_ALIGN - (prefix + text_len) % NPY_ALIGN;
  size_t total = prefix + text_len + pad;
  if (total > size || text_len + pad > 65535) {
    return 0;
  }
  memset(buf + prefix + (size_t)n, ' ', total - prefix - (size_t)n);
  buf[total - 1] = '\n';
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((text_len + pad) & 0xff);
  buf[9] = (char)((text_len + pad) >> 8);
  return total;
}

int pf_npy_write_file(const char* path, const pf_npy_array_t* arr, char* err, size_t err_size) {
  if (path == NULL) {
    return fail(err, err_size, "pf_npy_write_file", "path is NULL");
  }
  if (arr == NULL) {
    return fail(err, err_size, path, "array is NULL");
  }
  char descr[8];
  if (check_array(arr, descr, sizeof descr, path, err, err_size) != 0) {
    return -1;
  }
  char header[2048];
  size_t header_len = build_header(header, sizeof header, descr, arr->shape, arr->ndim);
  if (header_len == 0) {
    return fail(err, err_size, path, "header does not fit"); /* unreachable: see build_header */
  }
  FILE* fp = fopen(path, "wb");
  if (fp == NULL) {
    return fail(err, err_size, path, "cannot open for writing: %s", strerror(errno));
  }
  int ok = fwrite(header, 1, header_len, fp) == header_len &&
           (arr->nbytes == 0 || fwrite(arr->data, 1, arr->nbytes, fp) == arr->nbytes);
  int saved_errno = errno;
  if (fclose(fp) != 0 && ok) {
    ok = 0;
    saved_errno = errno;
  }
  if (!ok) {
    remove(path);
    return fail(err, err_size, path, "write error: %s", strerror(saved_errno));
  }
  return 0;
}

/* ---- printing: floating point ------------------------------------------------------------- */

/* A binary floating-point format: precision in bits, exponent range, and NumPy's
 * finfo(dtype).precision (decimal digits), which sets where printing turns scientific. */
typedef struct {
  int bits;
  int emin;
  int emax;
  int decimal_digits;
} float_spec_t;

static const float_spec_t k_float16 = {11, -14, 15, 3};
static const float_spec_t k_bfloat16 = {8, -126, 127, 2};
static const float_spec_t k_float32 = {24, -126, 127, 6};
static const float_spec_t k_float64 = {53, -1022, 1023, 15};

static uint64_t double_bits(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static int is_nan(double v) {
  return v != v;
}
static int is_finite(double v) {
  return !is_nan(v) && !is_nan(v - v);
}
static int sign_bit(double v) {
  return (int)(double_bits(v) >> 63);
}

/* 2**k for -1022 <= k <= 1023, exactly. */
static double pow2(int k) {
  uint64_t u = (uint64_t)(k + 1023) << 52;
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* Rounds v to the nearest value of format fs (ties to even), as converting to that type would,
 * overflowing to infinity: integer arithmetic on the bits, so no libm and no UB. */
static double round_to_format(double v, const float_spec_t* fs) {
  uint64_t u = double_bits(v);
  int biased = (int)((u >> 52) & 0x7ff);
  if (fs->bits == 53 || biased == 0x7ff || (u << 1) == 0) {
    return v;
  }
  if (biased == 0) {
    return sign_bit(v) ? -0.0 : 0.0; /* double subnormals are far below every fs->emin */
  }
  uint64_t sig = (u & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
  int e = biased - 1023; /* |v| = sig * 2**(e - 52) */
  int quantum = (e < fs->emin ? fs->emin : e) - (fs->bits - 1);
  int shift = quantum - (e - 52);
  if (shift >= 54) {
    return sign_bit(v) ? -0.0 : 0.0;
  }
  if (shift > 0) {
    uint64_t rest = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    sig >>= shift;
    if (rest > half || (rest == half && (sig & 1))) {
      sig++;
    }
  } else {
    quantum = e - 52;
  }
  double r = (double)sig * pow2(quantum);
  double max = (pow2(fs->bits) - 1) * pow2(fs->emax - fs->bits + 1);
  if (r > max) {
    r = INFINITY;
  }
  return sign_bit(v) ? -r : r;
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  double m = h & 0x3ff;
  double v = e == 0x1f ? (m != 0 ? NAN : INFINITY)
             : e == 0  ? m * pow2(-24)
                       : (m + 1024) * pow2(e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Digits of a finite value: |v| = d[0].d[1..n-1] * 10**exp, d without trailing zeros. */
typedef struct {
  int negative;
  int n;
  int exp;
  char d[24]; /* n digits, not NUL-terminated; room for one more */
} decimal_t;

/* Parses printf's "%.*e" output, dropping trailing zeros unless keep_zeros; the decimal point
 * may be any character (locales). */
static void decimal_parse(const char* s, decimal_t* out, int keep_zeros) {
  out->negative = *s == '-';
  out->n = 0;
  s += out->negative;
  while (*s != '\0' && *s != 'e' && *s != 'E') {
    if (*s >= '0' && *s <= '9' && out->n + 1 < (int)sizeof out->d) {
      out->d[out->n++] = *s;
    }
    s++;
  }
  out->exp = *s != '\0' ? (int)strtol(s + 1, NULL, 10) : 0;
  while (!keep_zeros && out->n > 1 && out->d[out->n - 1] == '0') {
    out->n--;
  }
}

/* The shortest digits that read back as v in format fs, as NumPy's Dragon4 prints them, with at
 * most max_frac digits after the first (then rounded, as Dragon4 rounds at its cutoff). */
static void decimal_shortest(double v, const float_spec_t* fs, int max_frac, decimal_t* out) {
  char s[48];
  for (int prec = 0; prec <= max_frac && prec < 17; prec++) {
    snprintf(s, sizeof s, "%.*e", prec, v);
    double back = fs->bits == 24 ? (double)strtof(s, NULL) : strtod(s, NULL);
    if (round_to_format(back, fs) == v) {
      decimal_parse(s, out, 0);
      return;
    }
  }
  snprintf(s, sizeof s, "%.*e", max_frac < 16 ? max_frac : 16, v);
  decimal_parse(s, out, 0);
}

/* How one set of floats is printed (NumPy's FloatingFormat, floatmode 'maxprec', precision 8). */
typedef struct {
  const float_spec_t* fs;
  int sign_plus;  /* print '+' on non-negative values (the imaginary part) */
  int exp_format; /* scientific notation */
  int precision;  /* scientific: digits after the point, zero padded */
  int pad_left;   /* characters before the point */
  int pad_right;  /* positional: characters after it, space padded */
  int exp_size;   /* scientific: exponent digits */
  int any_finite; /* statistics gathered before the sizes: */
  int any_nonfinite;
  int any_neg_inf;
  int any_nonzero;
  double max_abs;
  double min_abs;
} float_format_t;

#define NPY_PRECISION 8 /* numpy.get_printoptions()['precision'] */

/* Splits v into "[-]int" and "frac" digits, positional or scientific (then *exp is set). */
static void float_parts(const float_format_t* f, double v, char* ip, size_t ip_size, char* fp,
                        size_t fp_size, int* exp) {
  decimal_t dec;
  int scientific = f->exp_format;
  decimal_shortest(v, f->fs, scientific ? NPY_PRECISION : 17, &dec);
  const char* sign = dec.negative ? "-" : f->sign_plus ? "+" : "";
  if (!scientific && dec.n - 1 - dec.exp > NPY_PRECISION) {
    /* Too many digits after the point: round there, as Dragon4's cutoff does. */
    char s[400];
    snprintf(s, sizeof s, "%.*f", NPY_PRECISION, v < 0 ? -v : v);
    size_t int_len = strspn(s, "0123456789");
    size_t frac_len = strlen(s + int_len + 1);
    while (frac_len > 0 && s[int_len + frac_len] == '0') {
      frac_len--;
    }
    snprintf(ip, ip_size, "%s%.*s", sign, (int)int_len, s);
    snprintf(fp, fp_size, "%.*s", (int)frac_len, s + int_len + 1);
    return;
  }
  if (scientific) {
    snprintf(ip, ip_size, "%s%c", sign, dec.d[0]);
    snprintf(fp, fp_size, "%.*s", dec.n - 1, dec.d + 1);
    *exp = dec.exp;
    return;
  }
  size_t len = (size_t)snprintf(ip, ip_size, "%s", sign);
  if (dec.exp < 0) {
    snprintf(ip + len, ip_size - len, "0");
    size_t flen = 0;
    for (int i = 0; i < -dec.exp - 1 && flen + 1 < fp_size; i++) {
      fp[flen++] = '0';
    }
    snprintf(fp + flen, fp_size - flen, "%.*s", dec.n, dec.d);
    return;
  }
  for (int i = 0; i <= dec.exp && len + 1 < ip_size; i++) {
    ip[len++] = i < dec.n ? dec.d[i] : '0';
  }
  ip[len] = '\0';
  snprintf(fp, fp_size, "%.*s", dec.n > dec.exp + 1 ? dec.n - dec.exp - 1 : 0, dec.d + dec.exp + 1);
}

static int count_digits(int v) {
  int n = 1;
  for (v = v < 0 ? -v : v; v >= 10; v /= 10) {
    n++;
  }
  return n;
}

/* First pass: the range of the values. */
static void float_format_observe(float_format_t* f, double v) {
  if (!is_finite(v)) {
    f->any_nonfinite = 1;
    f->any_neg_inf |= !is_nan(v) && v < 0;
    return;
  }
  f->any_finite = 1;
  double a = v < 0 ? -v : v;
  if (a != 0) {
    f->max_abs = f->any_nonzero && f->max_abs > a ? f->max_abs : a;
    f->min_abs = f->any_nonzero && f->min_abs < a ? f->min_abs : a;
    f->any_nonzero = 1;
  }
}

/* Between the passes: scientific when the values span too much, compared in the element type
 * as NumPy does (its Python-float constants take the array's dtype). */
static void float_format_choose(float_format_t* f) {
  if (!f->any_nonzero) {
    return;
  }
  double cutoff = 1;
  for (int i = 0; i < (f->fs->decimal_digits < 8 ? f->fs->decimal_digits : 8); i++) {
    cutoff *= 10;
  }
  f->exp_format = f->max_abs >= round_to_format(cutoff, f->fs) ||
                  f->min_abs < round_to_format(0.0001, f->fs) ||
                  round_to_format(f->max_abs / f->min_abs, f->fs) > 1000.0;
}

/* Second pass: the widths. */
static void float_format_measure(float_format_t* f, double v) {
  if (!is_finite(v)) {
    return;
  }
  char ip[400];
  char fp[400];
  int exp = 0;
  float_parts(f, v, ip, sizeof ip, fp, sizeof fp, &exp);
  int il = (int)strlen(ip);
  int fl = (int)strlen(fp);
  f->pad_left = il > f->pad_left ? il : f->pad_left;
  if (f->exp_format) {
    int ed = count_digits(exp) < 2 ? 2 : count_digits(exp);
    f->precision = fl > f->precision ? fl : f->precision;
    f->exp_size = ed > f->exp_size ? ed : f->exp_size;
  } else {
    f->pad_right = fl > f->pad_right ? fl : f->pad_right;
  }
}

/* After the passes: room for nan and inf. */
static void float_format_finish(float_format_t* f) {
  if (f->exp_format) {
    f->pad_right = f->exp_size + 2 + f->precision;
  }
  if (f->any_nonfinite) {
    int offset = f->pad_right + 1;
    int inf_len = 3 + (f->sign_plus || f->any_neg_inf);
    f->pad_left = f->pad_left > 3 - offset ? f->pad_left : 3 - offset;
    f->pad_left = f->pad_left > inf_len - offset ? f->pad_left : inf_len - offset;
  }
}

/* Appends `pad` copies of `fill` and then s to the word out[0..*len), which stays
 * NUL-terminated and is cut at size - 1. */
static void word_append(char* out, size_t size, size_t* len, char fill, int pad, const char* s) {
  for (; pad > 0 && *len + 1 < size; pad--) {
    out[(*len)++] = fill;
  }
  for (; *s != '\0' && *len + 1 < size; s++) {
    out[(*len)++] = *s;
  }
  out[*len] = '\0';
}

static void float_format_print(const float_format_t* f, double v, char* out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  if (!is_finite(v)) {
    const char* s = is_nan(v)      ? (f->sign_plus ? "+nan" : "nan")
                    : v < 0        ? "-inf"
                    : f->sign_plus ? "+inf"
                                   : "inf";
    word_append(out, size, &len, ' ', f->pad_left + f->pad_right + 1 - (int)strlen(s), s);
    return;
  }
  char ip[400];
  if (f->exp_format) {
    /* Dragon4's min_digits: digits past the unique ones are the value's own, rounded, which is
     * what printf prints. */
    char s[48];
    char exp[16];
    decimal_t dec;
    snprintf(s, sizeof s, "%.*e", f->precision, v);
    decimal_parse(s, &dec, 1);
    snprintf(ip, sizeof ip, "%s%c", dec.negative ? "-" : f->sign_plus ? "+" : "", dec.d[0]);
    dec.d[dec.n] = '\0';
    snprintf(exp, sizeof exp, "%d", dec.exp < 0 ? -dec.exp : dec.exp);
    word_append(out, size, &len, ' ', f->pad_left - (int)strlen(ip), ip);
    word_append(out, size, &len, ' ', 0, ".");
    word_append(out, size, &len, ' ', 0, dec.d + 1);
    word_append(out, size, &len, ' ', 0, dec.exp < 0 ? "e-" : "e+");
    word_append(out, size, &len, '0', f->exp_size - (int)strlen(exp), exp);
    return;
  }
  char fp[400];
  int exp = 0;
  float_parts(f, v, ip, sizeof ip, fp, sizeof fp, &exp);
  word_append(out, size, &len, ' ', f->pad_left - (int)strlen(ip), ip);
  word_append(out, size, &len, ' ', 0, ".");
  word_append(out, size, &len, ' ', 0, fp);
  word_append(out, size, &len, ' ', f->pad_right - (int)strlen(fp), "");
}

/* ---- printing: arrays --------------------------------------------------------------------- */

#define NPY_LINE_WIDTH 75   /* numpy.get_printoptions()['linewidth'] */
#define NPY_THRESHOLD  1000 /* more elements than this are summarised */
#define NPY_EDGE_ITEMS 3    /* elements kept at each end of a summarised axis */
#define NPY_WORD_MAX   256  /* longest printed element, with room to spare */

typedef enum { ELEM_BOOL, ELEM_INT, ELEM_UINT, ELEM_FLOAT, ELEM_COMPLEX } elem_kind_t;

/* A growing output string that knows the column it is at. */
typedef struct {
  char* p;
  size_t len;
  size_t cap;
  size_t line_start;
  int out_of_memory;
} strbuf_t;

static void sb_append(strbuf_t* b, const char* s, size_t n) {
  if (b->out_of_memory) {
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) {
      cap *= 2;
    }
    char* p = realloc(b->p, cap);
    if (p == NULL) {
      b->out_of_memory = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  for (size_t i = 0; i < n; i++) {
    b->p[b->len++] = s[i];
    if (s[i] == '\n') {
      b->line_start = b->len;
    }
  }
  b->p[b->len] = '\0';
}

static void sb_puts(strbuf_t* b, const char* s) {
  sb_append(b, s, strlen(s));
}

static void sb_spaces(strbuf_t* b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sb_append(b, " ", 1);
  }
}

static size_t sb_column(const strbuf_t* b) {
  return b->len - b->line_start;
}

/* What the printer needs, gathered once. */
typedef struct {
  elem_kind_t kind;
  size_t itemsize;
  const char* dtype_name;
  int dtype_implied; /* NumPy's repr leaves out dtype= for float64, int64, complex128, bool */
  int32_t ndim;
  const int64_t* shape;
  int64_t strides[PF_NPY_MAX_NDIM];
  const unsigned char* data;
  int summarize;
  float_format_t re; /* floats, and the real parts of complex values */
  float_format_t im; /* the imaginary parts */
  int any_int;
  int64_t int_min, int_max;
  uint64_t uint_max;
  int int_width;
  strbuf_t out;
} printer_t;

static int printer_init_type(printer_t* p, DLDataType dt) {
  static const struct {
    uint8_t code;
    uint8_t bits;
    elem_kind_t kind;
    const char* name;
    const float_spec_t* fs;
    int implied;
  } types[] = {
      {PF_NPY_DTYPE_CODE_BOOL, 8, ELEM_BOOL, "bool", NULL, 1},
      {kDLInt, 8, ELEM_INT, "int8", NULL, 0},
      {kDLInt, 16, ELEM_INT, "int16", NULL, 0},
      {kDLInt, 32, ELEM_INT, "int32", NULL, 0},
      {kDLInt, 64, ELEM_INT, "int64", NULL, 1},
      {kDLUInt, 8, ELEM_UINT, "uint8", NULL, 0},
      {kDLUInt, 16, ELEM_UINT, "uint16", NULL, 0},
      {kDLUInt, 32, ELEM_UINT, "uint32", NULL, 0},
      {kDLUInt, 64, ELEM_UINT, "uint64", NULL, 0},
      {kDLFloat, 16, ELEM_FLOAT, "float16", &k_float16, 0},
      {kDLFloat, 32, ELEM_FLOAT, "float32", &k_float32, 0},
      {kDLFloat, 64, ELEM_FLOAT, "float64", &k_float64, 1},
      {kDLBfloat, 16, ELEM_FLOAT, "bfloat16", &k_bfloat16, 0},
      {kDLComplex, 64, ELEM_COMPLEX, "complex64", &k_float32, 0},
      {kDLComplex, 128, ELEM_COMPLEX, "complex128", &k_float64, 1},
  };
  if (dt.lanes != 1) {
    return -1;
  }
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    if (types[i].code == dt.code && types[i].bits == dt.bits) {
      p->kind = types[i].kind;
      p->itemsize = dt.bits / 8u;
      p->dtype_name = types[i].name;
      p->dtype_implied = types[i].implied;
      p->re.fs = p->im.fs = types[i].fs;
      p->im.sign_plus = 1;
      return 0;
    }
  }
  return -1;
}

/* One element as a double (floats) or a pair of them (complex). */
static double load_float(const unsigned char* at, size_t size, int code) {
  if (size == 2) {
    uint16_t h;
    memcpy(&h, at, 2);
    if (code == kDLBfloat) {
      uint32_t u = (uint32_t)h << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    return half_to_double(h);
  }
  if (size == 4) {
    float f;
    memcpy(&f, at, 4);
    return f;
  }
  double d;
  memcpy(&d, at, 8);
  return d;
}

static int64_t load_int(const unsigned char* at, size_t size) {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  switch (size) {
  case 1:
    memcpy(&i8, at, 1);
    return i8;
  case 2:
    memcpy(&i16, at, 2);
    return i16;
  case 4:
    memcpy(&i32, at, 4);
    return i32;
  default:
    memcpy(&i64, at, 8);
    return i64;
  }
}

static uint64_t load_uint(const unsigned char* at, size_t size) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (size) {
  case 1:
    memcpy(&u8, at, 1);
    return u8;
  case 2:
    memcpy(&u16, at, 2);
    return u16;
  case 4:
    memcpy(&u32, at, 4);
    return u32;
  default:
    memcpy(&u64, at, 8);
    return u64;
  }
}

typedef enum { PASS_OBSERVE, PASS_MEASURE } pass_t;

static void printer_visit_element(printer_t* p, const unsigned char* at, pass_t pass, int code) {
  switch (p->kind) {
  case ELEM_FLOAT:
  case ELEM_COMPLEX: {
    size_t part = p->kind == ELEM_COMPLEX ? p->itemsize / 2 : p->itemsize;
    double re = load_float(at, part, code);
    double im = p->kind == ELEM_COMPLEX ? load_float(at + part, part, code) : 0;
    if (pass == PASS_OBSERVE) {
      float_format_observe(&p->re, re);
      float_format_observe(&p->im, im);
    } else {
      float_format_measure(&p->re, re);
      float_format_measure(&p->im, im);
    }
    break;
  }
  case ELEM_INT: {
    int64_t v = load_int(at, p->itemsize);
    p->int_min = p->any_int && p->int_min < v ? p->int_min : v;
    p->int_max = p->any_int && p->int_max > v ? p->int_max : v;
    p->any_int = 1;
    break;
  }
  case ELEM_UINT: {
    uint64_t v = load_uint(at, p->itemsize);
    p->uint_max = p->uint_max > v ? p->uint_max : v;
    break;
  }
  case ELEM_BOOL:
    break;
  }
}

/* Visits the elements that will be printed: all of them, or the corners of a summarised array
 * (NumPy picks its formats from those alone). */
static void printer_visit(printer_t* p, int32_t axis, int64_t offset, pass_t pass, int code) {
  if (axis == p->ndim) {
    printer_visit_element(p, p->data + offset * (int64_t)p->itemsize, pass, code);
    return;
  }
  int64_t n = p->shape[axis];
  int summarize = p->summarize && n > 2 * NPY_EDGE_ITEMS;
  for (int64_t i = 0; i < n; i++) {
    if (summarize && i == NPY_EDGE_ITEMS) {
      i = n - NPY_EDGE_ITEMS;
    }
    printer_visit(p, axis + 1, offset + i * p->strides[axis], pass, code);
  }
}

static void printer_word(const printer_t* p, const unsigned char* at, int code, char* out,
                         size_t size) {
  switch (p->kind) {
  case ELEM_BOOL:
    snprintf(out, size, "%s", *at ? (p->ndim > 0 ? " True" : "True") : "False");
    break;
  case ELEM_INT:
    snprintf(out, size, "%*" PRId64, p->int_width, load_int(at, p->itemsize));
    break;
  case ELEM_UINT:
    snprintf(out, size, "%*" PRIu64, p->int_width, load_uint(at, p->itemsize));
    break;
  case ELEM_FLOAT:
    float_format_print(&p->re, load_float(at, p->itemsize, code), out, size);
    break;
  case ELEM_COMPLEX: {
    size_t part = p->itemsize / 2;
    char im[NPY_WORD_MAX];
    float_format_print(&p->re, load_float(at, part, code), out, size);
    float_format_print(&p->im, load_float(at + part, part, code), im, sizeof im);
    size_t used = strlen(im);
    while (used > 0 && im[used - 1] == ' ') {
      used--;
    }
    size_t len = strlen(out);
    /* the 'j' goes before the imaginary part's trailing padding */
    snprintf(out + len, size - len, "%.*sj%s", (int)used, im, im + used);
    break;
  }
  }
}

/* Appends a word to the current line, first wrapping if it would pass `width` (NumPy's
 * _extendLine: never wraps a line that holds nothing but its indent). */
static void printer_extend_line(printer_t* p, const char* word, size_t indent, size_t width) {
  size_t column = sb_column(&p->out);
  if (column + strlen(word) > width && column > indent) {
    while (p->out.len > p->out.line_start && p->out.p[p->out.len - 1] == ' ') {
      p->out.len--;
    }
    sb_puts(&p->out, "\n");
    sb_spaces(&p->out, indent);
  }
  sb_puts(&p->out, word);
}

/* NumPy's _formatArray: prints the sub-array at `axis`; the caller has put the cursor at column
 * `indent` - 1 for its '['. Rows wrap at `width`; outer axes put one more blank line between
 * blocks for each axis they have below. */
static void printer_print(printer_t* p, int32_t axis, int64_t offset, size_t indent, size_t width,
                          int code) {
  char word[NPY_WORD_MAX];
  if (axis == p->ndim) {
    printer_word(p, p->data + offset * (int64_t)p->itemsize, code, word, sizeof word);
    sb_puts(&p->out, word);
    return;
  }
  int64_t n = p->shape[axis];
  int summarize = p->summarize && n > 2 * NPY_EDGE_ITEMS;
  sb_puts(&p->out, "[");
  for (int64_t i = 0; i < n; i++) {
    int last_axis = axis == p->ndim - 1;
    if (!last_axis && i > 0) {
      sb_spaces(&p->out, indent);
    }
    if (summarize && i == NPY_EDGE_ITEMS) {
      if (last_axis) {
        printer_extend_line(p, "...", indent, width - 1);
        sb_puts(&p->out, ", ");
      } else {
        sb_puts(&p->out, "...,");
        for (int32_t k = axis; k < p->ndim - 1; k++) {
          sb_puts(&p->out, "\n");
        }
        sb_spaces(&p->out, indent);
      }
      i = n - NPY_EDGE_ITEMS;
    }
    int64_t at = offset + i * p->strides[axis];
    if (last_axis) {
      printer_word(p, p->data + at * (int64_t)p->itemsize, code, word, sizeof word);
      printer_extend_line(p, word, indent, width - 1);
      if (i + 1 < n) {
        sb_puts(&p->out, ", ");
      }
    } else {
      printer_print(p, axis + 1, at, indent + 1, width - 1, code);
      if (i + 1 < n) {
        sb_puts(&p->out, ",");
        for (int32_t k = axis; k < p->ndim - 1; k++) {
          sb_puts(&p->out, "\n");
        }
      }
    }
  }
  sb_puts(&p->out, "]");
}

/* Builds "array(...)" into p->out; count is the number of elements. */
static void printer_repr(printer_t* p, uint64_t count, int code) {
  static const char prefix[] = "array(";
  const size_t prefix_len = sizeof prefix - 1;
  sb_puts(&p->out, prefix);
  if (count == 0) {
    sb_puts(&p->out, "[]");
  } else {
    printer_visit(p, 0, 0, PASS_OBSERVE, code);
    float_format_choose(&p->re);
    float_format_choose(&p->im);
    printer_visit(p, 0, 0, PASS_MEASURE, code);
    float_format_finish(&p->re);
    float_format_finish(&p->im);
    if (p->kind == ELEM_INT) {
      char a[24];
      char b[24];
      int la = snprintf(a, sizeof a, "%" PRId64, p->int_min);
      int lb = snprintf(b, sizeof b, "%" PRId64, p->int_max);
      p->int_width = la > lb ? la : lb;
    } else if (p->kind == ELEM_UINT) {
      char a[24];
      p->int_width = snprintf(a, sizeof a, "%" PRIu64, p->uint_max);
    }
    /* the suffix ")" or "," takes one column of the line width */
    printer_print(p, 0, 0, prefix_len + 1, NPY_LINE_WIDTH - 1, code);
  }
  char extras[PF_NPY_MAX_NDIM * 22 + 64] = "";
  size_t len = 0;
  if ((count == 0 && p->ndim != 1) || count > NPY_THRESHOLD) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    format_shape(shape, sizeof shape, p->shape, p->ndim);
    len += (size_t)snprintf(extras, sizeof extras, "shape=%s", shape);
  }
  if (!p->dtype_implied || count == 0) {
    snprintf(extras + len, sizeof extras - len, "%sdtype=%s", len > 0 ? ", " : "", p->dtype_name);
  }
  if (extras[0] == '\0') {
    sb_puts(&p->out, ")");
    return;
  }
  sb_puts(&p->out, ",");
  if (sb_column(&p->out) + strlen(extras) + 2 > NPY_LINE_WIDTH) {
    sb_puts(&p->out, "\n");
    sb_spaces(&p->out, prefix_len);
  } else {
    sb_puts(&p->out, " ");
  }
  sb_puts(&p->out, extras);
  sb_puts(&p->out, ")");
}

int pf_npy_format_raw(DLDataType dtype, int32_t ndim, const int64_t* shape, const int64_t* strides,
                      const void* data, FILE* out) {
  printer_t p;
  memset(&p, 0, sizeof p);
  if (out == NULL || ndim < 0 || ndim > PF_NPY_MAX_NDIM || (ndim > 0 && shape == NULL) ||
      printer_init_type(&p, dtype) != 0) {
    return -1;
  }
  /* The element count saturates: all that matters is whether it passes the threshold. */
  /* The count stops at INT64_MAX: past the threshold only that matters, and such an array can
   * only be a broadcast view with explicit strides. */
  uint64_t count = 1;
  int any_zero = 0;
  int fits = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      return -1;
    }
    any_zero |= shape[i] == 0;
  }
  for (int32_t i = 0; i < ndim && !any_zero && fits; i++) {
    fits = count <= (uint64_t)INT64_MAX / (uint64_t)shape[i];
    count = fits ? count * (uint64_t)shape[i] : (uint64_t)INT64_MAX;
  }
  count = any_zero ? 0 : count;
  if ((count > 0 && data == NULL) || (!fits && strides == NULL)) {
    return -1;
  }
  int64_t c_stride = 1;
  for (int32_t i = ndim - 1; i >= 0 && count > 0; i--) {
    p.strides[i] = strides != NULL ? strides[i] : c_stride;
    c_stride = strides != NULL ? 0 : c_stride * shape[i];
  }
  p.ndim = ndim;
  p.shape = shape;
  p.data = data;
  p.summarize = count > NPY_THRESHOLD;
  printer_repr(&p, count, dtype.code);
  int rc = -1;
  if (!p.out.out_of_memory && fwrite(p.out.p, 1, p.out.len, out) == p.out.len) {
    rc = 0;
  }
  free(p.out.p);
  return rc;
}

int pf_npy_format(const pf_npy_array_t* arr, FILE* out) {
  if (arr == NULL) {
    return -1;
  }
  return pf_npy_format_raw(arr->dtype, arr->ndim, arr->shape, NULL, arr->data, out);
}
