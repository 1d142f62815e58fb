// Maps (72) and dicts (76) holding keys that TVM-FFI hashes through a registered __any_hash__
// (its BigInt, type 78; its StructuralKey, a type packfn learns of from TVM-FFI's __any_hash__
// type attribute), written and copied by packfn: packfn cannot compute that hash, so a
// write that would place such a key again (a rebuild, or moving a chain whose head the key's
// hash names) must be refused with a TypeError and leave the map as it was; every other write
// goes through. After each call, TVM-FFI must still find every key. Also: pf_map_copy copies
// maps with float, bool, None and BigInt keys so that TVM-FFI finds them in the copy.
// Exits 0 when every check holds (and it ends: a chain walk used to loop); prints failures.
#include <tvm/ffi/big_int.h>
#include <tvm/ffi/container/dict.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/structural_key.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "interop_check.h"

namespace ffi = tvm::ffi;

static ffi::BigInt big(int i) {
  return (ffi::BigInt(1) << 70) + static_cast<int64_t>(7919) * i;
}

static int64_t int_key(int i) {
  return static_cast<int64_t>(i) * 2654435761LL + 17;
}

static pf_object_t* raw_of(const ffi::ObjectRef& ref) {
  return reinterpret_cast<pf_object_t*>(const_cast<ffi::Object*>(ref.get()));
}

// The raised error is a TypeError naming the BigInt key; cleared.
static void check_bigint_refusal(const char* func) {
  pf_object_t* err = pf_error_take();
  CHECK(err != nullptr);
  if (!err)
    return;
  CHECK(std::strcmp(pf_error_kind(err), "TypeError") == 0);
  CHECK(std::strstr(pf_error_message(err), func) != nullptr);
  CHECK(std::strstr(pf_error_message(err), "BigInt") != nullptr);
  CHECK(std::strstr(pf_error_message(err), "__any_hash__") != nullptr);
  pf_error_clear();
  pf_object_release(err);
}

// packfn sets (and erases) int keys in a TVM-FFI dict holding nb BigInt keys and 4 int keys.
static void packfn_writes_bigint_dict(int nb, int nk) {
  ffi::Dict<ffi::Any, ffi::Any> d;
  for (int i = 0; i < nb; ++i)
    d.Set(big(i), static_cast<int64_t>(i));
  for (int i = 1; i < 5; ++i)
    d.Set(static_cast<int64_t>(i * 1000003), static_cast<int64_t>(-i));
  pf_object_t* raw = raw_of(d);
  std::vector<int> present(nk, 0);
  size_t expected = static_cast<size_t>(nb) + 4;
  int refused = 0;
  for (int i = 0; i < nk; ++i) {
    pf_any_t k = pf_any_int(int_key(i)), v = pf_any_int(i);
    size_t before = d.size();
    if (pf_dict_set(raw, &k, &v) == 0) {
      present[i] = 1;
      ++expected;
    } else {
      check_bigint_refusal("pf_dict_set");
      CHECK(d.size() == before);
      ++refused;
    }
    if (i % 3 == 0 && present[i]) {
      CHECK(pf_dict_erase(raw, &k) == 1);
      present[i] = 0;
      --expected;
    }
    CHECK(d.size() == expected);
  }
  // a BigInt key of packfn's own: refused, nothing changed
  ffi::Any kb = big(nb + 1);
  const TVMFFIAny* kraw = reinterpret_cast<const TVMFFIAny*>(&kb);
  pf_any_t kview = pf_any_none();
  kview.type_index = kraw->type_index;
  kview.v_obj = reinterpret_cast<pf_object_t*>(kraw->v_obj);
  pf_any_t one = pf_any_int(1);
  CHECK(pf_dict_set(raw, &kview, &one) == -1);
  check_bigint_refusal("pf_dict_set");
  CHECK(d.size() == expected);
  // TVM-FFI finds everything; packfn finds the int keys
  for (int i = 0; i < nb; ++i) {
    CHECK(d.count(big(i)) == 1);
    if (d.count(big(i)))
      CHECK(d.at(big(i)).cast<int64_t>() == i);
  }
  for (int i = 0; i < nk; ++i) {
    CHECK(d.count(int_key(i)) == static_cast<size_t>(present[i]));
    pf_any_t k = pf_any_int(int_key(i));
    const pf_any_t* got = nullptr;
    CHECK(pf_dict_get(raw, &k, &got) == 0);
    CHECK((got != nullptr) == (present[i] != 0));
    if (got)
      CHECK(got->v_int64 == i);
  }
  for (int i = 1; i < 5; ++i)
    CHECK(d.at(static_cast<int64_t>(i * 1000003)).cast<int64_t>() == -i);
  // TVM-FFI itself keeps writing the dict afterwards
  for (int i = 0; i < 50; ++i)
    d.Set(static_cast<int64_t>(-1 - i), static_cast<int64_t>(i));
  for (int i = 0; i < nb; ++i)
    CHECK(d.count(big(i)) == 1);
  if (nb > 0)
    CHECK(refused > 0 || nk < 2); // the table had to grow at some point
}

// A packfn dict into which TVM-FFI puts BigInt keys; packfn writes on.
static void tvm_adds_bigint_to_packfn_dict(int n) {
  pf_object_t* raw;
  CHECK(pf_dict_create(&raw) == 0);
  for (int i = 0; i < n; ++i) {
    pf_any_t k = pf_any_int(int_key(i)), v = pf_any_int(i);
    CHECK(pf_dict_set(raw, &k, &v) == 0);
  }
  ffi::Any any;
  TVMFFIAny a;
  a.type_index = raw->type_index;
  a.zero_padding = 0;
  a.v_obj = reinterpret_cast<TVMFFIObject*>(raw);
  any = ffi::AnyView::CopyFromTVMFFIAny(a);
  pf_object_release(raw);
  auto d = any.cast<ffi::Dict<ffi::Any, ffi::Any>>();
  for (int i = 0; i < 7; ++i)
    d.Set(big(i), static_cast<int64_t>(i));
  for (int i = n; i < n + 200; ++i) {
    pf_any_t k = pf_any_int(int_key(i)), v = pf_any_int(i);
    if (pf_dict_set(raw, &k, &v) != 0)
      check_bigint_refusal("pf_dict_set");
  }
  for (int i = 0; i < 7; ++i)
    CHECK(d.count(big(i)) == 1);
  for (int i = 0; i < n; ++i)
    CHECK(d.count(int_key(i)) == 1);
}

// pf_map_copy of TVM-FFI maps with keys packfn does not set: the copy is found by TVM-FFI.
static void copies(int n) {
  ffi::Map<ffi::Any, ffi::Any> m;
  m.Set(1.5, static_cast<int64_t>(1));
  m.Set(true, static_cast<int64_t>(2));
  m.Set(ffi::Any(nullptr), static_cast<int64_t>(3));
  for (int i = 0; i < n; ++i)
    m.Set(int_key(i), static_cast<int64_t>(i));
  for (int with_big = 0; with_big < 2; ++with_big) {
    if (with_big)
      m.Set(big(1), static_cast<int64_t>(4));
    pf_object_t* copy = nullptr;
    CHECK(pf_map_copy(raw_of(m), &copy) == 0);
    if (!copy)
      continue;
    ffi::Any any;
    TVMFFIAny a;
    a.type_index = copy->type_index;
    a.zero_padding = 0;
    a.v_obj = reinterpret_cast<TVMFFIObject*>(copy);
    any = ffi::AnyView::CopyFromTVMFFIAny(a);
    auto c = any.cast<ffi::Map<ffi::Any, ffi::Any>>();
    CHECK(c.size() == m.size());
    CHECK(c.at(1.5).cast<int64_t>() == 1);
    CHECK(c.at(true).cast<int64_t>() == 2);
    CHECK(c.at(ffi::Any(nullptr)).cast<int64_t>() == 3);
    if (with_big)
      CHECK(c.at(big(1)).cast<int64_t>() == 4);
    // packfn sets more keys into its open copy (refused only with the BigInt, when the
    // keys would move)
    for (int i = n; i < n + 40; ++i) {
      pf_any_t k = pf_any_int(int_key(i)), v = pf_any_int(i);
      if (pf_map_set(copy, &k, &v) != 0) {
        CHECK(with_big);
        check_bigint_refusal("pf_map_set");
      }
    }
    CHECK(c.at(1.5).cast<int64_t>() == 1);
    CHECK(c.at(true).cast<int64_t>() == 2);
    CHECK(c.at(ffi::Any(nullptr)).cast<int64_t>() == 3);
    if (with_big)
      CHECK(c.at(big(1)).cast<int64_t>() == 4);
    for (int i = 0; i < n; ++i)
      CHECK(c.at(int_key(i)).cast<int64_t>() == i);
    pf_object_release(copy);
  }
}

// StructuralKey (a dynamic type): packfn knows it hashes its own way only from the joined
// TVM-FFI's __any_hash__ column.
static void structural_keys(int nk) {
  ffi::Dict<ffi::Any, ffi::Any> d;
  std::vector<ffi::StructuralKey> keys;
  for (int i = 0; i < 6; ++i) {
    keys.emplace_back(ffi::Any(static_cast<int64_t>(1000 + i)));
    d.Set(keys.back(), static_cast<int64_t>(i));
  }
  pf_object_t* raw = raw_of(d);
  ffi::StructuralKey fresh(ffi::Any(static_cast<int64_t>(77)));
  pf_any_t ks = pf_any_object(raw_of(fresh)), one = pf_any_int(1);
  CHECK(pf_dict_set(raw, &ks, &one) == -1); // as a new key: refused
  {
    pf_object_t* err = pf_error_take();
    CHECK(err != nullptr && std::strstr(pf_error_message(err), "ffi.StructuralKey") != nullptr);
    pf_object_release(err);
  }
  int refused = 0;
  for (int i = 0; i < nk; ++i) {
    pf_any_t k = pf_any_int(int_key(i)), v = pf_any_int(i);
    if (pf_dict_set(raw, &k, &v) != 0) {
      pf_object_t* err = pf_error_take();
      CHECK(err != nullptr && std::strstr(pf_error_message(err), "ffi.StructuralKey") != nullptr);
      pf_object_release(err);
      ++refused;
    }
  }
  CHECK(refused > 0);
  for (int i = 0; i < 6; ++i) {
    ffi::StructuralKey again(ffi::Any(static_cast<int64_t>(1000 + i))); // equal, not identical
    CHECK(d.count(again) == 1);
  }
}

int main() {
  pf_tvm_ffi_join(); // a program that links libtvm_ffi: packfn asks it which types hash their way
  for (int nb : {0, 1, 3, 20, 200})
    for (int nk : {1, 4, 60, 300})
      packfn_writes_bigint_dict(nb, nk);
  for (int n : {0, 3, 40})
    tvm_adds_bigint_to_packfn_dict(n);
  for (int n : {0, 1, 30})
    copies(n);
  structural_keys(100);
  if (failures)
    std::fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
