/* Regression test (review of the error layer, 2026-11-23): naming the native frames of an error
 * (PACKFN_BACKTRACE=1, set by CTest).
 * - A frame line longer than 1 KiB (a long exported symbol) was cut without its newline, so the
 *   next frame joined it; once the name cache was half full, such a line, named uncached,
 *   overflowed the text's buffer (heap corruption, abort).
 * - A library path holding '(' was cut at it ("./plug", in 1).
 * - Frames captured before their library was unloaded were named after it by whatever was
 *   mapped there (another library's symbol) and lines of unmapped addresses were kept, so the
 *   library loaded again read "<unknown>" until another unload.
 *   regress_backtrace_names MODULE (bt_module.c built as a module) */
#define _GNU_SOURCE /* mkdtemp */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "packfn/packfn.h"

#define CAT_(a, b) a##b
#define CAT(a, b)  CAT_(a, b)
#define N64        long_name_0123456789_0123456789_0123456789_0123456789_0123456
#define N128       CAT(N64, N64)
#define N256       CAT(N128, N128)
#define N512       CAT(N256, N256)
#define N1024      CAT(N512, N512)
#define LONG_NAME  CAT(CAT(N1024, N1024), N1024) /* 3 * 1024 - 3 characters */
#define STR_(x)    #x
#define STR(x)     STR_(x)

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL (line %d): ", __LINE__);                                               \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Exported (the program is linked with -rdynamic), so that its frame is named. */
__attribute__((noinline, visibility("default"))) void LONG_NAME(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "from the long name");
  __asm__ volatile("");
}

/* Every line of text is one whole frame line: `  File "...", line N, in ...\n`. */
static void check_lines(const char* what, const char* text) {
  const char* p = text;
  int lines = 0;
  while (*p) {
    const char* nl = strchr(p, '\n');
    CHECK(nl != NULL, "%s: last line without a newline: '%.80s'", what, p);
    if (!nl)
      return;
    CHECK(strncmp(p, "  File \"", 8) == 0, "%s: line %d is not a frame line: '%.80s'", what, lines,
          p);
    const char* second = strstr(p + 1, "  File \"");
    CHECK(!second || second > nl, "%s: line %d holds two frames", what, lines);
    lines++;
    p = nl + 1;
  }
  CHECK(lines >= 3, "%s: %d lines", what, lines);
}

static void check_long_name(const char* what) {
  LONG_NAME();
  pf_object_t* err = pf_error_take();
  CHECK(err != NULL, "%s: nothing raised", what);
  if (!err)
    return;
  const char* text = pf_error_backtrace(err);
  check_lines(what, text);
  const char* at = strstr(text, ", in " STR(LONG_NAME) "+0x");
  CHECK(at != NULL, "%s: no whole line for the long name in\n%s", what, text);
  pf_object_release(err);
}

/* A raise from a call site of its own, read (its frames named and kept). */
#define R1                                                                                         \
  do {                                                                                             \
    PF_ERROR_SET(PF_ERR_VALUE, "site");                                                            \
    pf_object_t* e = pf_error_take();                                                              \
    (void)pf_error_backtrace(e);                                                                   \
    pf_object_release(e);                                                                          \
  } while (0);
#define R8   R1 R1 R1 R1 R1 R1 R1 R1
#define R64  R8 R8 R8 R8 R8 R8 R8 R8
#define R512 R64 R64 R64 R64 R64 R64 R64 R64

__attribute__((noinline)) static void fill_name_cache(void) {
  R512 R64 R64
}

static int copy_file(const char* from, const char* to) {
  FILE* in = fopen(from, "rb");
  FILE* out = in ? fopen(to, "wb") : NULL;
  char buf[65536];
  size_t n;
  int ok = in && out;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
    ok = fwrite(buf, 1, n, out) == n;
  if (in)
    fclose(in);
  if (out && fclose(out) != 0)
    ok = 0;
  return ok ? 0 : -1;
}

static void* load(const char* path, void (**raise)(void)) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
  void* sym = h ? dlsym(h, "bt_module_raise") : NULL;
  *raise = NULL;
  if (sym) /* POSIX makes the conversion valid; memcpy keeps ISO C quiet */
    memcpy(raise, &sym, sizeof sym);
  CHECK(!h || *raise, "no bt_module_raise in %s", path);
  return h;
}

static pf_object_t* raise_in(void (*raise)(void)) {
  raise();
  pf_object_t* err = pf_error_take();
  CHECK(err != NULL, "the module raised nothing");
  return err;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE\n", argv[0]);
    return 2;
  }
  const char* env = getenv("PACKFN_BACKTRACE");
  if (!env || strcmp(env, "1") != 0) {
    fprintf(stderr, "run with PACKFN_BACKTRACE=1\n");
    return 2;
  }
  check_long_name("long name, cache empty");
  fill_name_cache(); /* past the half of the cache the names are kept in */
  check_long_name("long name, cache full");

  /* a module under a folder whose name holds parentheses */
  char dir[] = "/tmp/pf_bt_XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char sub[64], path[96];
  snprintf(sub, sizeof sub, "%s/plug(1)", dir);
  snprintf(path, sizeof path, "%s/mod.so", sub);
  CHECK(mkdir(sub, 0700) == 0 && copy_file(argv[1], path) == 0, "copy of %s", argv[1]);
  char want[160];
  snprintf(want, sizeof want, "  File \"%s\", line 0, in bt_module_raise+0x", path);

  void (*raise)(void) = NULL;
  void* h = load(path, &raise);
  if (h && raise) {
    pf_object_t* err = raise_in(raise);
    const char* text = err ? pf_error_backtrace(err) : "";
    CHECK(strstr(text, want) != NULL, "no line '%s' in\n%s", want, text);
    pf_object_release(err);

    /* raised, then the module unloaded before the text is read: its frames keep their
     * addresses (what is mapped there now is not what raised) */
    err = raise_in(raise);
    raise = NULL;
    CHECK(dlclose(h) == 0, "dlclose");
    h = NULL;
    if (err) {
      const pf_error_cell_t* cell = (const pf_error_cell_t*)(err + 1);
      text = pf_error_backtrace(err);
      CHECK(strstr(text, "bt_module_raise+0x") == NULL, "named after the unload:\n%s", text);
      CHECK(strstr(text, "File \"<native>\", line 0, in 0x") != NULL, "no address lines:\n%s",
            text);
      CHECK(strcmp(text, cell->backtrace.data) == 0, "text and cell differ");
      check_lines("after the unload", text);
    }
    pf_object_release(err);

    /* loaded again (often at the same address): named again */
    h = load(path, &raise);
    if (h && raise) {
      err = raise_in(raise);
      text = err ? pf_error_backtrace(err) : "";
      CHECK(strstr(text, want) != NULL, "loaded again: no line '%s' in\n%s", want, text);
      pf_object_release(err);
    }
  }
  if (h)
    dlclose(h);
  unlink(path);
  rmdir(sub);
  rmdir(dir);
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("ok: long names, a parenthesised path and an unloaded module's frames\n");
  return 0;
}
