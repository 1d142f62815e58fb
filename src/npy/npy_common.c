/* npy_common.c: the helpers the .npy reader, writer and printer share (error messages, byte
 * order, shape text, size arithmetic) and the dtype-to-descr mapping. */
#include "npy_private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* The length (1 to 4) of the well-formed UTF-8 character at p (NUL-terminated), else 0: the
 * second byte's range leaves out overlong forms, surrogates and code points past U+10FFFF. */
static size_t utf8_length(const unsigned char* p) {
  unsigned char c = p[0];
  if (c < 0x80) {
    return 1;
  }
  size_t n = c >= 0xc2 && c <= 0xdf   ? 2
             : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4
                                      : 0;
  unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
  unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
  if (n == 0 || p[1] < lo || p[1] > hi) {
    return 0;
  }
  for (size_t i = 2; i < n; ++i) {
    if (p[i] < 0x80 || p[i] > 0xbf) {
      return 0;
    }
  }
  return n;
}

int pf__npy_fail(char* err, size_t err_size, const char* name, const char* fmt, ...) {
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
  /* a header's text (a dtype, a key) and a file name are the file's, not ours: their control
   * characters would reach a terminal as its commands (an escape sequence in 'descr' retitled
   * the window and cleared the screen; review) */
  pf_npy_clean_text(err);
  return -1;
}

/* Each control character shows as '?': C0, DEL and C1, the last in UTF-8 (U+0080..U+009F,
 * C2 80..C2 9F) or as a byte 0x80..0x9F of no UTF-8 character, which an 8-bit terminal reads
 * (CSI 0x9B is ESC [; both got through; review). Other bytes stay. */
void pf_npy_clean_text(char* text) {
  if (text == NULL) {
    return;
  }
  unsigned char* w = (unsigned char*)text;
  for (const unsigned char* r = w; *r != '\0';) {
    size_t len = utf8_length(r);
    int control = len == 1   ? *r < 0x20 || *r == 0x7f
                  : len == 2 ? r[0] == 0xc2 && r[1] < 0xa0
                             : len == 0 && *r < 0xa0;
    len = len > 0 ? len : 1;
    if (control) {
      *w++ = '?';
      r += len;
    } else {
      while (len-- > 0) {
        *w++ = *r++;
      }
    }
  }
  *w = '\0';
}

int pf__npy_populate_fits(size_t length) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 && length / (size_t)page <= (size_t)pages / 4;
}

int pf__npy_host_is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

void pf__npy_format_shape(char* buf, size_t size, const int64_t* shape, int32_t ndim) {
  size_t len = (size_t)snprintf(buf, size, "(");
  for (int32_t i = 0; i < ndim && len < size; i++) {
    len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i > 0 ? ", " : "", shape[i]);
  }
  if (len < size) {
    snprintf(buf + len, size - len, "%s)", ndim == 1 ? "," : "");
  }
}

int pf__npy_array_size(const int64_t* shape, int32_t ndim, size_t itemsize, size_t* count,
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
  char order = bits == 8 ? '|' : pf__npy_host_is_little_endian() ? '<' : '>';
  int n = snprintf(buf, size, "%c%c%d", order, kind, bits / 8);
  if (n < 0 || (size_t)n >= size) {
    if (size > 0) {
      buf[0] = '\0';
    }
    return -1;
  }
  return 0;
}
