/* npy_read.c: the .npy reader: descr and header dict parsing, size checks, byte swapping and
 * Fortran-to-C transposition, from a file or a buffer. */
#include "npy_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Longest descr and key strings we keep; anything longer is unsupported anyway. */
#define NPY_TOKEN_MAX 48

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
    return pf__npy_fail(err, err_size, name, "unsupported dtype '%s' (%s)", descr, reason);
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
    return pf__npy_fail(err, err_size, name, "unsupported dtype '%s' (no DLPack equivalent)",
                        descr);
  }
  dtype->code = (uint8_t)code;
  dtype->bits = (uint8_t)(size * 8);
  dtype->lanes = 1;
  int little = pf__npy_host_is_little_endian();
  *swap = size > 1 && ((order == '<' && !little) || (order == '>' && little));
  return 0;
}

/* ---- header dict -------------------------------------------------------------------------- */

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
 * size - 1); -1 if none starts here, it is not closed, or it holds a NUL byte or a backslash:
 * no key or descr numpy writes has either, and numpy refuses a descr with an escape or a NUL
 * (which a C string would cut short: '<f4\0' passed as float32; review). */
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
    if (ch == '\\' || ch == '\0') {
      return -1;
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
  return pf__npy_fail(c->err, c->err_size, c->name,
                      "'fortran_order' is not True or False: got '%s'",
                      cursor_preview(c, got, sizeof got));
}

/* Reads a shape tuple: "()", "(3,)", "(2, 3)", "(2, 3,)"; Python 2's "3L" is accepted too. */
static int cursor_read_shape(header_cursor_t* c, pf__npy_header_t* h) {
  char got[24];
  if (cursor_peek(c) != '(') {
    return pf__npy_fail(c->err, c->err_size, c->name,
                        "'shape' is not a tuple of integers: got '%s'",
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
    /* a sign, as Python's literal reader takes it: -0 is 0 (NumPy loads (-0,) as (0,)) */
    const char* sign = cursor_peek(c) == '-' || cursor_peek(c) == '+' ? c->p++ : NULL;
    if (cursor_peek(c) < '0' || cursor_peek(c) > '9') {
      c->p = sign != NULL ? sign : c->p;
      return pf__npy_fail(c->err, c->err_size, c->name,
                          "'shape' is not a tuple of integers: got '%s'",
                          cursor_preview(c, got, sizeof got));
    }
    int64_t dim = 0;
    while (cursor_peek(c) >= '0' && cursor_peek(c) <= '9') {
      int digit = *c->p++ - '0';
      if (dim > (INT64_MAX - digit) / 10) {
        return pf__npy_fail(c->err, c->err_size, c->name,
                            "shape dimension %d is too large (over 2**63 - 1)", (int)ndim);
      }
      dim = dim * 10 + digit;
    }
    if (sign != NULL && *sign == '-' && dim != 0) {
      c->p = sign;
      return pf__npy_fail(c->err, c->err_size, c->name, "shape has a negative dimension: '%s'",
                          cursor_preview(c, got, sizeof got));
    }
    if (cursor_peek(c) == 'L' || cursor_peek(c) == 'l') {
      c->p++; /* Python 2 long literal, as NumPy wrote under Python 2 */
    }
    if (ndim == PF_NPY_MAX_NDIM) {
      return pf__npy_fail(c->err, c->err_size, c->name, "shape has more than %d dimensions",
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
        return pf__npy_fail(c->err, c->err_size, c->name,
                            "'shape' (%" PRId64 ") is not a tuple: a 1-d shape is written (%" PRId64
                            ",)",
                            dim, dim);
      }
      break;
    } else {
      return pf__npy_fail(c->err, c->err_size, c->name,
                          "'shape' is not a tuple of integers: got '%s'",
                          cursor_preview(c, got, sizeof got));
    }
  }
  h->ndim = ndim;
  return 0;
}

static int cursor_read_descr(header_cursor_t* c, pf__npy_header_t* h) {
  char descr[NPY_TOKEN_MAX];
  char got[24];
  if (cursor_peek(c) == '[') {
    return pf__npy_fail(c->err, c->err_size, c->name,
                        "unsupported dtype: structured (record) arrays have no DLPack equivalent");
  }
  if (cursor_read_string(c, descr, sizeof descr) != 0) {
    return pf__npy_fail(c->err, c->err_size, c->name, "'descr' is not a string: got '%s'",
                        cursor_preview(c, got, sizeof got));
  }
  return parse_descr(descr, &h->dtype, &h->swap, c->name, c->err, c->err_size);
}

/* Parses the header dict, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
 * with the keys in any order, any whitespace, and an optional trailing comma. Like NumPy, it
 * requires exactly the three keys. */
static int parse_header(const char* text, size_t len, pf__npy_header_t* h, const char* name,
                        char* err, size_t err_size) {
  header_cursor_t c = {text, text + len, name, err, err_size};
  int seen[3] = {0, 0, 0}; /* descr, fortran_order, shape */
  static const char* const keys[3] = {"descr", "fortran_order", "shape"};
  char got[24];
  memset(h, 0, sizeof *h);
  cursor_skip_space(&c);
  if (cursor_peek(&c) != '{') {
    return pf__npy_fail(err, err_size, name, "header is not a dict: it starts with '%s'",
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
      return pf__npy_fail(err, err_size, name,
                          "header is not a dict: expected a quoted key, got '%s'",
                          cursor_preview(&c, got, sizeof got));
    }
    cursor_skip_space(&c);
    if (cursor_peek(&c) != ':') {
      return pf__npy_fail(err, err_size, name, "header is not a dict: expected ':' after '%s'",
                          key);
    }
    c.p++;
    cursor_skip_space(&c);
    int k = 0;
    while (k < 3 && strcmp(key, keys[k]) != 0) {
      k++;
    }
    if (k == 3) {
      return pf__npy_fail(err, err_size, name, "header has an unexpected key '%s'", key);
    }
    if (seen[k]) {
      return pf__npy_fail(err, err_size, name, "header has the key '%s' twice", key);
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
      return pf__npy_fail(
          err, err_size, name,
          "header is not a dict: expected ',' or '}' after the value of '%s', got '%s'", key,
          cursor_preview(&c, got, sizeof got));
    }
  }
  cursor_skip_space(&c);
  if (c.p != c.end) {
    return pf__npy_fail(err, err_size, name, "header has text after the dict: '%s'",
                        cursor_preview(&c, got, sizeof got));
  }
  for (int k = 0; k < 3; k++) {
    if (!seen[k]) {
      return pf__npy_fail(err, err_size, name, "header has no '%s' key", keys[k]);
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
    return pf__npy_fail(err, err_size, name, "read error: %s", strerror(errno));
  }
  return pf__npy_fail(err, err_size, name, "file is truncated: expected %zu bytes of %s, got %zu",
                      expected, what, got);
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

/* Reads the preamble and the header dict, leaving src at the first byte of data; *h the
 * header, *count and *nbytes the data's size. */
static int read_header(npy_source_t* src, const char* name, pf__npy_header_t* h, size_t* count,
                       size_t* nbytes, char* err, size_t err_size) {
  unsigned char pre[12];
  size_t got = source_read(src, pre, 10);
  if (got == 0 && !(src->fp != NULL && ferror(src->fp))) {
    return pf__npy_fail(err, err_size, name, "file is empty: not a .npy file");
  }
  if (memcmp(pre, NPY_MAGIC, got < NPY_MAGIC_LEN ? got : NPY_MAGIC_LEN) != 0) {
    return pf__npy_fail(err, err_size, name, "not a .npy file: bad magic string");
  }
  if (got < 8) {
    return short_read(src, "preamble", 10, got, name, err, err_size);
  }
  int major = pre[6];
  int minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    return pf__npy_fail(err, err_size, name,
                        "unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are known)", major,
                        minor);
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
    return pf__npy_fail(err, err_size, name,
                        "header length %" PRIu32 " is over the limit of %d bytes", header_len,
                        PF_NPY_MAX_HEADER_LEN);
  }
  char* text = malloc(header_len + 1u);
  if (text == NULL) {
    return pf__npy_fail(err, err_size, name, "out of memory reading the header");
  }
  got = source_read(src, text, header_len);
  int rc = got < header_len ? short_read(src, "header", header_len, got, name, err, err_size)
                            : parse_header(text, header_len, h, name, err, err_size);
  free(text);
  if (rc != 0) {
    return -1;
  }
  if (pf__npy_array_size(h->shape, h->ndim, h->dtype.bits / 8u, count, nbytes) != 0) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    pf__npy_format_shape(shape, sizeof shape, h->shape, h->ndim);
    return pf__npy_fail(err, err_size, name, "shape %s is too large: its size in bytes overflows",
                        shape);
  }
  return 0;
}

int pf__npy_read_header_file(FILE* fp, const char* name, pf__npy_header_t* h, size_t* nbytes,
                             char* err, size_t err_size) {
  npy_source_t src = {fp, NULL, 0, 0};
  size_t count;
  return read_header(&src, name, h, &count, nbytes, err, err_size);
}

/* Reads the data that follows the header `h` (count elements, nbytes bytes) from src into *out:
 * byte-swapped and transposed to C order as needed. 0, or -1 with a message in err. */
static int read_data(npy_source_t* src, const char* name, const pf__npy_header_t* hp, size_t count,
                     size_t nbytes, pf_npy_array_t* out, char* err, size_t err_size) {
  const pf__npy_header_t h = *hp;
  size_t itemsize = h.dtype.bits / 8u;
  uint64_t left = 0;
  int left_known = source_left(src, &left) == 0;
  if (left_known && left < nbytes) {
    return pf__npy_fail(err, err_size, name,
                        "file is truncated: expected %zu bytes of data, got %" PRIu64, nbytes,
                        left);
  }
  if (left_known && left > nbytes) {
    return pf__npy_fail(err, err_size, name,
                        "expected %zu bytes of data, got %" PRIu64 " (one array per file)", nbytes,
                        left);
  }
  unsigned char* data = malloc(nbytes > 0 ? nbytes : 1);
  if (data == NULL) {
    return pf__npy_fail(err, err_size, name, "out of memory: cannot allocate %zu bytes of data",
                        nbytes);
  }
  size_t got = source_read(src, data, nbytes);
  unsigned char extra;
  if (got < nbytes) {
    free(data);
    return short_read(src, "data", nbytes, got, name, err, err_size);
  }
  if (!left_known && source_read(src, &extra, 1) == 1) {
    free(data);
    return pf__npy_fail(err, err_size, name,
                        "expected %zu bytes of data, got more (one array per file)", nbytes);
  }
  if (h.swap) {
    size_t unit = h.dtype.code == kDLComplex ? itemsize / 2 : itemsize;
    swap_bytes(data, nbytes / unit, unit);
  }
  if (h.fortran_order && h.ndim > 1 && count > 1) {
    unsigned char* c_order = malloc(nbytes);
    if (c_order == NULL) {
      free(data);
      return pf__npy_fail(err, err_size, name, "out of memory: cannot allocate %zu bytes of data",
                          nbytes);
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

static int read_npy(npy_source_t* src, const char* name, pf_npy_array_t* out, char* err,
                    size_t err_size) {
  pf__npy_header_t h;
  size_t count = 0;
  size_t nbytes = 0;
  if (read_header(src, name, &h, &count, &nbytes, err, err_size) != 0) {
    return -1;
  }
  return read_data(src, name, &h, count, nbytes, out, err, err_size);
}

int pf__npy_read_data_file(FILE* fp, const char* name, const pf__npy_header_t* h,
                           pf_npy_array_t* out, char* err, size_t err_size) {
  size_t count = 0;
  size_t nbytes = 0;
  memset(out, 0, sizeof *out);
  if (pf__npy_array_size(h->shape, h->ndim, h->dtype.bits / 8u, &count, &nbytes) != 0) {
    return pf__npy_fail(err, err_size, name, "shape is too large: its size in bytes overflows");
  }
  npy_source_t src = {fp, NULL, 0, 0};
  return read_data(&src, name, h, count, nbytes, out, err, err_size);
}

int pf_npy_read_buffer(const void* buf, size_t size, pf_npy_array_t* out, char* err,
                       size_t err_size) {
  const char* name = "<buffer>";
  if (out == NULL) {
    return pf__npy_fail(err, err_size, name, "output array is NULL");
  }
  memset(out, 0, sizeof *out);
  if (buf == NULL && size > 0) {
    return pf__npy_fail(err, err_size, name, "buffer is NULL");
  }
  npy_source_t src = {NULL, buf, size, 0};
  return read_npy(&src, name, out, err, err_size);
}

int pf_npy_read_file(const char* path, pf_npy_array_t* out, char* err, size_t err_size) {
  if (out != NULL) {
    memset(out, 0, sizeof *out);
  }
  if (path == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_read_file", "path is NULL");
  }
  if (out == NULL) {
    return pf__npy_fail(err, err_size, path, "output array is NULL");
  }
  FILE* fp = fopen(path, "rbe"); /* close-on-exec, as every descriptor here */
  if (fp == NULL) {
    return pf__npy_fail(err, err_size, path, "cannot open: %s", strerror(errno));
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
