/* libFuzzer harness: export metadata (pf_export_meta_t, include/packfn/module.h). The loader
 * reads metadata only from a library's dynamic symbol table, so this executable is its own
 * library: it exports __packfn_fz and a writable __packfn_meta_fz (built with ENABLE_EXPORTS)
 * that each input rewrites (magic, version, signature and doc texts, a typed declaration with
 * fuzzed name, parameter count, parameter names and kinds, result kind), then reads it the way
 * a loaded library's is read: pf_module_system (which validates every __packfn_meta_ symbol),
 * pf_module_list, pf_module_get_function and a call with fuzzed arguments.
 * Properties: never crashes; every failure raises an error; malformed metadata (bad magic,
 * version 0, a declaration without implementation) is refused with ValueError; the list and
 * the function carry the same signature, an untyped export's the metadata's signature and doc
 * texts as they are; the untyped export's call answers its argument count. */
#include "fuzz_util.h"
#include "packfn/packfn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define MAX_PARAMS 128 /* backs every num_params an int8 can name */
#define MAX_TEXT   3

static int fz_plain(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(num_args);
  return 0;
}
PF_EXPORT(fz, fz_plain);

static int fz_typed(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_none();
  return 0;
}

/* the metadata under test: writable, rewritten by every input */
__attribute__((visibility("default"))) pf_export_meta_t __packfn_meta_fz;

static pf_signature_t sig;
static pf_param_t params[MAX_PARAMS];
static char* texts[MAX_TEXT];

/* NULL or a fuzzed text, kept in texts[] until the next input. */
static const char* maybe_text(fuzz_input_t* in, int slot) {
  if ((fuzz_u8(in) & 3) == 0)
    return NULL;
  free(texts[slot]);
  texts[slot] = fuzz_str(in);
  return texts[slot];
}

/* parameter names: fixed texts, so one declaration can hold many */
static const char* const names[] = {
    "q", NULL, "", "x", "a name with spaces, commas: (and) ->", "%s%n%p", "\xff\xfe"};

static void build_meta(fuzz_input_t* in) {
  uint8_t flags = fuzz_u8(in);
  pf_export_meta_t m;
  memset(&m, 0, sizeof m);
  m.magic = (flags & 1) ? (uint32_t)fuzz_u64(in, 4) : PF_EXPORT_META_MAGIC;
  m.version = (flags & 2) ? (uint32_t)fuzz_u64(in, 4) : PF_EXPORT_META_VERSION;
  m.signature = maybe_text(in, 0);
  m.doc = maybe_text(in, 1);
  if (flags & 4) {
    sig.name = maybe_text(in, 2);
    uint8_t np = fuzz_u8(in);
    sig.num_params = np < 200 ? (int32_t)(np % 5) : (int32_t)(int8_t)fuzz_u8(in);
    for (int i = 0; i < MAX_PARAMS; ++i) {
      params[i].name = "p";
      params[i].kind = PF_PARAM_INT;
    }
    int n = sig.num_params > 0 ? sig.num_params : 0;
    for (int i = 0; i < n && in->size > 0; ++i) {
      uint8_t k = fuzz_u8(in);
      params[i].kind = (pf_param_kind_t)(k < 200 ? k % 13 : (int8_t)k);
      params[i].name = names[(k >> 4) % (sizeof names / sizeof names[0])];
    }
    uint8_t r = fuzz_u8(in);
    sig.result = (pf_param_kind_t)(r < 200 ? r % 13 : (int8_t)r);
    sig.params = params;
    sig.doc = NULL;
    m.typed_sig = (flags & 8) ? NULL : &sig;
    m.typed_impl = (flags & 16) ? NULL : fz_typed;
    if (!m.typed_sig && (flags & 32) == 0)
      m.typed_impl = NULL;
  }
  __packfn_meta_fz = m;
}

/* 1 when texts a and b are equal, NULL equal to NULL only. */
static int same_text(const char* a, const char* b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* A malloc'ed copy of s; NULL for NULL (memory running out ends the run: a finding). */
static char* copy_text(const char* s) {
  if (!s)
    return NULL;
  char* c = malloc(strlen(s) + 1);
  FUZZ_CHECK(c != NULL);
  return strcpy(c, s);
}

static void call_it(pf_object_t* fn, int typed, fuzz_input_t* in) {
  pf_any_t args[6];
  int32_t n = (int32_t)(fuzz_u8(in) % 7);
  if (n > 6)
    n = 6;
  for (int32_t i = 0; i < n; ++i) {
    switch (fuzz_u8(in) % 6) {
    case 0:
      args[i] = pf_any_int(fuzz_i64(in));
      break;
    case 1:
      args[i] = pf_any_float((double)fuzz_i64(in) / 3.0);
      break;
    case 2:
      args[i] = pf_any_cstr("text");
      break;
    case 3:
      args[i] = pf_any_bool(fuzz_u8(in) & 1);
      break;
    case 4:
      args[i] = pf_any_object(fn);
      break;
    default:
      args[i] = pf_any_none();
      break;
    }
  }
  pf_any_t res = pf_any_none();
  if (pf_function_call(fn, args, n, &res) == 0) {
    /* fz_plain answers its argument count */
    if (!typed)
      FUZZ_CHECK(res.type_index == PF_TYPE_INT && res.v_int64 == n);
    pf_any_release(&res);
  } else
    FUZZ_CHECK(pf_error_peek() != NULL);
  pf_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_input_t in = {data, size};
  build_meta(&in);
  const pf_export_meta_t* m = &__packfn_meta_fz;
  int malformed = m->magic != PF_EXPORT_META_MAGIC || m->version < 1 ||
                  (m->typed_sig != NULL) != (m->typed_impl != NULL);
  pf_object_t* mod = NULL;
  if (pf_module_system(&mod) != 0) {
    pf_object_t* err = pf_error_take();
    FUZZ_CHECK(err != NULL);
    FUZZ_CHECK(!malformed || strcmp(pf_error_kind(err), PF_ERR_VALUE) == 0);
    pf_object_release(err);
    return 0;
  }
  FUZZ_CHECK(!malformed);
  pf_export_info_t* list = NULL;
  size_t count = 0;
  const char* listed_sig = NULL; /* fz's entry, copied before the list is freed */
  int listed = 0;
  if (pf_module_list(mod, &list, &count) == 0) {
    int found = 0;
    for (size_t i = 0; i < count; ++i) {
      if (strcmp(list[i].name, "fz") == 0) {
        found = 1;
        /* an untyped export lists the metadata's texts as they are */
        if (!m->typed_sig)
          FUZZ_CHECK(same_text(list[i].signature, m->signature) && same_text(list[i].doc, m->doc));
        listed_sig = copy_text(list[i].signature);
        listed = 1;
      }
    }
    FUZZ_CHECK(found && list[count].name == NULL);
    pf_module_list_free(list);
  } else {
    FUZZ_CHECK(pf_error_peek() != NULL);
    pf_error_clear();
  }
  pf_object_t* fn = NULL;
  if (pf_module_get_function(mod, "fz", &fn) == 0) {
    /* the function carries what the list said, and an untyped one the metadata's texts */
    if (listed)
      FUZZ_CHECK(same_text(pf_function_signature(fn), listed_sig));
    if (!m->typed_sig)
      FUZZ_CHECK(same_text(pf_function_signature(fn), m->signature) &&
                 same_text(pf_function_doc(fn), m->doc));
    call_it(fn, m->typed_sig != NULL, &in);
    pf_object_release(fn);
  } else {
    FUZZ_CHECK(pf_error_peek() != NULL);
    pf_error_clear();
  }
  free((void*)listed_sig);
  pf_object_release(mod);
  FUZZ_CHECK(pf_error_peek() == NULL);
  return 0;
}
