// Maps (72) and dicts (76) crossing between packfn's C API and TVM-FFI's C++ ffi::Map /
// ffi::Dict in one process: each side reads, finds, iterates and writes the other's, in the
// small form and the dense form, with int, string and object keys, across the small -> dense
// switch. Exits 0 when every check holds; prints each failed check.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/dict.h>
#include <tvm/ffi/container/list.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/string.h>

#include <cstdio>
#include <string>
#include <vector>

#include "interop_check.h"

namespace ffi = tvm::ffi;

static std::string key_name(int i) {
  return "key-" + std::to_string(i) + (i % 3 ? "" : "-long-enough-for-a-heap-string");
}

// An ObjectRef adopting a new packfn reference.
template <typename T> static T adopt(pf_object_t* obj) {
  ffi::Any any;
  TVMFFIAny raw;
  raw.type_index = obj->type_index;
  raw.zero_padding = 0;
  raw.v_obj = reinterpret_cast<TVMFFIObject*>(obj);
  any = ffi::AnyView::CopyFromTVMFFIAny(raw); // retains
  pf_object_release(obj);
  return any.cast<T>();
}

static pf_object_t* raw_of(const ffi::ObjectRef& ref) {
  return reinterpret_cast<pf_object_t*>(const_cast<ffi::Object*>(ref.get()));
}

// packfn builds, TVM-FFI reads and writes.
static void packfn_map_to_tvm(int n) {
  pf_object_t* map;
  CHECK(pf_map_create(&map) == 0);
  for (int i = 0; i < n; ++i) {
    pf_any_t ki = pf_any_int(i * 31), vi = pf_any_int(i);
    std::string s = key_name(i);
    pf_any_t ks = pf_any_cstr(s.c_str()), vs = pf_any_int(-i);
    CHECK(pf_map_set(map, &ki, &vi) == 0);
    CHECK(pf_map_set(map, &ks, &vs) == 0);
  }
  auto m = adopt<ffi::Map<ffi::Any, ffi::Any>>(map);
  CHECK(m.size() == static_cast<size_t>(2 * n));
  for (int i = 0; i < n; ++i) {
    CHECK(m.count(static_cast<int64_t>(i * 31)) == 1);
    CHECK(m.at(static_cast<int64_t>(i * 31)).cast<int64_t>() == i);
    CHECK(m.at(ffi::String(key_name(i))).cast<int64_t>() == -i);
  }
  CHECK(m.count(static_cast<int64_t>(-5)) == 0);
  CHECK(m.count(ffi::String("absent")) == 0);
  int idx = 0; // insertion order
  for (auto kv : m) {
    if (idx % 2 == 0)
      CHECK(kv.first.cast<int64_t>() == (idx / 2) * 31);
    else
      CHECK(kv.first.cast<ffi::String>() == key_name(idx / 2));
    ++idx;
  }
  CHECK(idx == 2 * n);
  // TVM-FFI writes: held once, Map::Set writes in place or switches storage
  m.Set(ffi::String("added by C++"), static_cast<int64_t>(7));
  for (int i = 0; i < 6; ++i)
    m.Set(static_cast<int64_t>(100000 + i), static_cast<int64_t>(i));
  const pf_any_t* got = nullptr;
  pf_any_t k = pf_any_cstr("added by C++");
  CHECK(pf_map_get(raw_of(m), &k, &got) == 0 && got && got->v_int64 == 7);
  pf_any_t k2 = pf_any_int(100005);
  CHECK(pf_map_get(raw_of(m), &k2, &got) == 0 && got && got->v_int64 == 5);
}

// TVM-FFI builds, packfn reads, iterates and copies.
static void tvm_map_to_packfn(int n) {
  ffi::Map<ffi::Any, ffi::Any> m;
  ffi::Array<ffi::Any> objs;
  for (int i = 0; i < n; ++i) {
    ffi::Array<ffi::Any> obj{static_cast<int64_t>(i)};
    objs.push_back(obj);
    m.Set(static_cast<int64_t>(i * 7), static_cast<int64_t>(i));
    m.Set(ffi::String(key_name(i)), static_cast<int64_t>(-i));
    m.Set(obj, static_cast<int64_t>(1000 + i));
  }
  pf_object_t* map = raw_of(m);
  size_t count = 0;
  CHECK(pf_map_count(map, &count) == 0 && count == static_cast<size_t>(3 * n));
  for (int i = 0; i < n; ++i) {
    const pf_any_t* got = nullptr;
    pf_any_t ki = pf_any_int(i * 7);
    CHECK(pf_map_get(map, &ki, &got) == 0 && got && got->v_int64 == i);
    std::string s = key_name(i);
    pf_any_t ks = pf_any_cstr(s.c_str());
    CHECK(pf_map_get(map, &ks, &got) == 0 && got && got->v_int64 == -i);
    pf_any_t ko = pf_any_object(raw_of(objs[i].cast<ffi::ObjectRef>()));
    CHECK(pf_map_get(map, &ko, &got) == 0 && got && got->v_int64 == 1000 + i);
  }
  pf_any_t absent = pf_any_int(-1);
  CHECK(pf_map_contains(map, &absent) == 0);
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  CHECK(pf_map_iter_init(map, &it) == 0);
  size_t seen = 0;
  auto cpp = m.begin();
  while (pf_map_iter_next(&it, &k, &v) == 1) { // the same order as C++'s iterator
    CHECK(cpp != m.end());
    if (cpp == m.end())
      break;
    CHECK(k->type_index == (*cpp).first.type_index());
    CHECK(v->v_int64 == (*cpp).second.cast<int64_t>());
    ++cpp;
    ++seen;
  }
  CHECK(seen == count);
  // copy-on-write from C: an open copy, changed, leaves the original alone
  pf_object_t* copy = nullptr;
  CHECK(pf_map_copy(map, &copy) == 0);
  pf_any_t knew = pf_any_cstr("new"), vnew = pf_any_int(1);
  CHECK(pf_map_set(copy, &knew, &vnew) == 0);
  CHECK(pf_map_set(map, &knew, &vnew) == -1); // not packfn's open map
  pf_object_release(pf_error_take());
  CHECK(m.count(ffi::String("new")) == 0);
  auto mc = adopt<ffi::Map<ffi::Any, ffi::Any>>(copy);
  CHECK(mc.size() == count + 1 && mc.at(ffi::String("new")).cast<int64_t>() == 1);
  for (int i = 0; i < n; ++i)
    CHECK(mc.at(objs[i]).cast<int64_t>() == 1000 + i);
}

// Dicts: shared and mutable from both sides.
static void dicts(int n) {
  pf_object_t* d;
  CHECK(pf_dict_create(&d) == 0);
  auto cd = adopt<ffi::Dict<ffi::Any, ffi::Any>>(d);
  ffi::Dict<ffi::Any, ffi::Any> td;
  for (int i = 0; i < n; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(2 * i);
    CHECK(pf_dict_set(raw_of(cd), &k, &v) == 0);               // packfn writes its own dict
    CHECK(pf_dict_set(raw_of(td), &k, &v) == 0);               // and TVM-FFI's, growing it in place
    cd.Set(ffi::String(key_name(i)), static_cast<int64_t>(i)); // C++ writes packfn's
    td.Set(ffi::String(key_name(i)), static_cast<int64_t>(i));
  }
  for (auto* dict : {raw_of(cd), raw_of(td)}) {
    size_t count = 0;
    CHECK(pf_dict_count(dict, &count) == 0 && count == static_cast<size_t>(2 * n));
  }
  CHECK(cd.size() == static_cast<size_t>(2 * n) && td.size() == static_cast<size_t>(2 * n));
  for (int i = 0; i < n; ++i) {
    CHECK(cd.at(static_cast<int64_t>(i)).cast<int64_t>() == 2 * i);
    CHECK(td.at(static_cast<int64_t>(i)).cast<int64_t>() == 2 * i);
    const pf_any_t* got = nullptr;
    std::string s = key_name(i);
    pf_any_t ks = pf_any_cstr(s.c_str());
    CHECK(pf_dict_get(raw_of(cd), &ks, &got) == 0 && got && got->v_int64 == i);
    CHECK(pf_dict_get(raw_of(td), &ks, &got) == 0 && got && got->v_int64 == i);
  }
  for (int i = 0; i < n; i += 2) { // erase from both sides
    pf_any_t k = pf_any_int(i);
    CHECK(pf_dict_erase(raw_of(cd), &k) == 1);
    CHECK(pf_dict_erase(raw_of(td), &k) == 1);
    CHECK(pf_dict_erase(raw_of(td), &k) == 0);
    cd.erase(ffi::String(key_name(i)));
  }
  for (int i = 0; i < n; ++i) {
    CHECK(cd.count(static_cast<int64_t>(i)) == static_cast<size_t>(i % 2));
    CHECK(td.count(static_cast<int64_t>(i)) == static_cast<size_t>(i % 2));
    const pf_any_t* got = nullptr;
    std::string s = key_name(i);
    pf_any_t ks = pf_any_cstr(s.c_str());
    CHECK(pf_dict_get(raw_of(cd), &ks, &got) == 0 && (got != nullptr) == (i % 2 == 1));
  }
}

// A packfn dict C++ alone fills past the small form's 4 entries: TVM-FFI switches packfn's object
// to the dense form in place, writing its fields where the small entries were (packfn lays its
// maps out as TVM-FFI lays out its own, the small entries right after MapBaseObj's 56 bytes).
static void dict_grown_by_cxx(int n) {
  pf_object_t* d;
  CHECK(pf_dict_create(&d) == 0);
  auto cd = adopt<ffi::Dict<ffi::Any, ffi::Any>>(d);
  for (int i = 0; i < n; ++i)
    cd.Set(ffi::String(key_name(i)), static_cast<int64_t>(7 * i));
  size_t count = 0;
  CHECK(pf_dict_count(raw_of(cd), &count) == 0 && count == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::string s = key_name(i);
    pf_any_t ks = pf_any_cstr(s.c_str()), v = pf_any_int(-i);
    const pf_any_t* got = nullptr;
    CHECK(pf_dict_get(raw_of(cd), &ks, &got) == 0 && got && got->v_int64 == 7 * i);
    CHECK(pf_dict_set(raw_of(cd), &ks, &v) == 0); // and packfn writes the switched table
  }
  pf_any_t extra = pf_any_cstr("extra"), ve = pf_any_int(99);
  CHECK(pf_dict_set(raw_of(cd), &extra, &ve) == 0);
  CHECK(cd.size() == static_cast<size_t>(n + 1) &&
        cd.at(ffi::String("extra")).cast<int64_t>() == 99);
  for (int i = 0; i < n; ++i)
    CHECK(cd.at(ffi::String(key_name(i))).cast<int64_t>() == -i);
}

// Lists (75): packfn's list grown by C++ (ffi::List keeps packfn's data_deleter when it
// reallocates) and TVM-FFI's list grown by packfn; both read through either API.
static void lists(int n) {
  pf_object_t* l;
  CHECK(pf_list_create(&l) == 0);
  auto cl = adopt<ffi::List<ffi::Any>>(l);
  ffi::List<ffi::Any> tl;
  for (int i = 0; i < n; ++i) {
    pf_any_t v = pf_any_int(i);
    std::string s = key_name(i);
    pf_any_t vs = pf_any_cstr(s.c_str());
    CHECK(pf_list_append(raw_of(cl), &v) == 0);  // packfn grows its own list
    cl.push_back(ffi::String(key_name(i)));      // C++ grows packfn's
    CHECK(pf_list_append(raw_of(tl), &vs) == 0); // packfn grows TVM-FFI's
    tl.push_back(static_cast<int64_t>(i));       // and C++ its own
  }
  CHECK(cl.size() == static_cast<size_t>(2 * n) && tl.size() == static_cast<size_t>(2 * n));
  for (int i = 0; i < n; ++i) {
    CHECK(cl[2 * i].cast<int64_t>() == i);
    CHECK(cl[2 * i + 1].cast<ffi::String>() == key_name(i));
    CHECK(tl[2 * i].cast<ffi::String>() == key_name(i));
    CHECK(tl[2 * i + 1].cast<int64_t>() == i);
    const pf_any_t* got = nullptr;
    CHECK(pf_array_get(raw_of(tl), 2 * i + 1, &got) == 0 && got && got->v_int64 == i);
    CHECK(pf_array_get(raw_of(cl), 2 * i, &got) == 0 && got && got->v_int64 == i);
  }
  pf_any_t seven = pf_any_int(7), out;
  CHECK(pf_list_set(raw_of(tl), 0, &seven) == 0);
  CHECK(tl[0].cast<int64_t>() == 7);
  cl.Set(0, static_cast<int64_t>(8));
  const pf_any_t* got = nullptr;
  CHECK(pf_array_get(raw_of(cl), 0, &got) == 0 && got && got->v_int64 == 8);
  CHECK(pf_list_pop(raw_of(tl), -1, &out) == 0 && out.v_int64 == n - 1);
  CHECK(tl.size() == static_cast<size_t>(2 * n - 1));
  cl.pop_back();
  size_t count = 0;
  CHECK(pf_array_count(raw_of(cl), &count) == 0 && count == static_cast<size_t>(2 * n - 1));
  CHECK(pf_list_clear(raw_of(tl)) == 0 && tl.empty());
}

// Shapes TVM-FFI makes, read by packfn: one from an empty std::vector keeps the vector's data(),
// NULL, and pf_shape_data still gives a non-NULL pointer (it gave NULL).
static void shapes() {
  ffi::Shape empty(std::vector<int64_t>{});
  const int64_t* dims = nullptr;
  size_t ndim = 9;
  CHECK(pf_shape_data(raw_of(empty), &dims, &ndim) == 0 && dims != nullptr && ndim == 0);
  int64_t x = 7;
  CHECK(pf_shape_get(raw_of(empty), 0, &x) == -1 && x == 0);
  pf_object_release(pf_error_take());
  ffi::Shape three(std::vector<int64_t>{2, 3, 4});
  CHECK(pf_shape_data(raw_of(three), &dims, &ndim) == 0 && ndim == 3 && dims[2] == 4);
}

int main() {
  shapes();
  for (int n : {1, 2, 3, 5, 40, 700}) { // small, the switch, and dense
    packfn_map_to_tvm(n);
    tvm_map_to_packfn(n);
    dicts(n);
    dict_grown_by_cxx(n);
    lists(n);
  }
  if (failures)
    std::fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
