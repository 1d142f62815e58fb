/* A library for test_module whose export metadata is malformed: the loader must refuse it with
 * an error naming the symbol and saying what is wrong. One variant per compile definition: a
 * wrong magic (none), version 0 (META_VERSION0), a typed declaration without its implementation
 * (TYPED_SIG_ONLY), a typed implementation without a declaration (TYPED_IMPL_ONLY). DOC_ONLY
 * and NO_TEXTS are sound: metadata with a doc and no signature, and with neither. */
#include "packfn/packfn.h"

static int two(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(2);
  return 0;
}
PF_EXPORT(two, two);

#if defined(META_VERSION0)
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    PF_EXPORT_META_MAGIC, 0, "two() -> int", NULL, NULL, NULL};
#elif defined(TYPED_SIG_ONLY)
static const pf_signature_t sig = {"two", 0, NULL, PF_PARAM_INT, NULL};
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, NULL, NULL, &sig, NULL};
#elif defined(TYPED_IMPL_ONLY)
static int typed_two(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(2);
  return 0;
}
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, NULL, NULL, NULL, typed_two};
#elif defined(DOC_ONLY)
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, NULL, "Returns two.", NULL, NULL};
#elif defined(NO_TEXTS)
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, NULL, NULL, NULL, NULL};
#else
__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    0xdeadbeefu, PF_EXPORT_META_VERSION, "two() -> int", NULL, NULL, NULL};
#endif
