/* Tests of maps whose table another runtime wrote: chains placed by another hash, bad jump
 * indexes, BigInt keys, crowded chains and copies of keys packfn refuses to set; and two rvalue
 * references to one handle (refused by arrays and dicts alike), which runs among them. Part of
 * the container suite (test_container.c runs them). */
#include <stdint.h>

#include "pf_test_container.h"

/* ---- maps: the table as TVM-FFI (or a broken runtime) may leave it ----
 * The tests below write into a map's cell directly, as TVM-FFI's C++ does
 * (tvm/ffi/container/map_base.h), to make the tables packfn itself never makes. */

typedef struct {
  pf_object_t header;
  void* data;
  uint64_t size;
  uint64_t slots; /* bit 63: the small form */
  void (*data_deleter)(void*);
  uint32_t fib_shift;
  uint32_t padding;
  uint64_t iter_head, iter_tail;
} test_mapcell_t;

typedef struct {
  pf_any_t key, value;
} test_kv_t;

typedef struct {
  pf_any_t key, value;
  uint64_t prev, next;
} test_item_t;

typedef struct {
  uint8_t meta[16];
  test_item_t items[16];
} test_block_t;

static test_mapcell_t* cell_of(pf_object_t* map) {
  return (test_mapcell_t*)map;
}

static uint8_t* meta_at(pf_object_t* map, uint64_t i) {
  return &((test_block_t*)cell_of(map)->data)[i / 16].meta[i % 16];
}

static test_item_t* item_at(pf_object_t* map, uint64_t i) {
  return &((test_block_t*)cell_of(map)->data)[i / 16].items[i % 16];
}

/* TVM-FFI's AnyHash of int v (packfn's too), and the slot its chain starts at. */
static uint64_t int_hash(int64_t v) {
  uint64_t key = PF_TYPE_INT;
  return key ^ ((uint64_t)v + 0x9e3779b9u + (key << 6) + (key >> 2));
}

static uint64_t home_of(pf_object_t* map, int64_t v) {
  return (11400714819323198485ull * int_hash(v)) >> cell_of(map)->fib_shift;
}

/* An int absent from 0..n whose chain would start at slot `slot`. */
static int64_t int_with_home(pf_object_t* map, uint64_t slot) {
  for (int64_t v = 1000000;; ++v)
    if (home_of(map, v) == slot)
      return v;
}

/* A dense dict of the ints 0..n-1 (values -i). */
static pf_object_t* int_dict(int n) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  for (int i = 0; i < n; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(-i);
    ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  }
  ck_assert_uint_eq(cell_of(d)->slots >> 63, 0);
  return d;
}

/* Every key 0..n-1 (but `skip`) is found with its value, and the count is n. */
static void assert_int_dict(pf_object_t* d, int n, int skip) {
  size_t count;
  ck_assert_int_eq(pf_dict_count(d, &count), 0);
  ck_assert_uint_eq(count, (size_t)n);
  for (int i = 0; i < n; ++i) {
    if (i == skip)
      continue;
    pf_any_t k = pf_any_int(i);
    const pf_any_t* got;
    ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, -i);
  }
}

/* A slot holding the body (not the head) of a chain. */
static uint64_t a_body_slot(pf_object_t* d) {
  for (uint64_t i = 0; i < cell_of(d)->slots; ++i) {
    uint8_t m = *meta_at(d, i);
    if ((m & 0x80) && m != 0xFF && m != 0xFE)
      return i;
  }
  ck_abort_msg("no chain body in the table");
  return 0;
}

/* A type 78 object standing for TVM-FFI's BigInt, which TVM-FFI hashes by its value through a
 * registered __any_hash__: packfn cannot know where TVM-FFI places it. */
static pf_object_t* fake_bigint(void) {
  pf_object_t* obj;
  ck_assert_int_eq(
      pf_object_alloc(sizeof(pf_object_t) + 16, PF_TYPE_BIG_INT, counted_deleter, &obj), 0);
  return obj;
}

/* A key placed by another hash: pf_dict_set needs the slot of a chain body whose key does not
 * hash to its chain's head; packfn must refuse, not loop or read past its jump table. */
START_TEST(test_dict_foreign_chain_refused) {
  pf_object_t* d = int_dict(100);
  uint64_t body = a_body_slot(d);
  test_item_t* it = item_at(d, body);
  pf_any_t kept = it->key;
  int64_t k_new = int_with_home(d, body);
  pf_any_t k = pf_any_int(k_new), v = pf_any_int(7);

  /* 1. a key whose home slot holds no chain: TVM-FFI placed it by a hash packfn does not know */
  uint64_t i = 0;
  int64_t stray = 2000000;
  for (;; ++stray) {
    i = home_of(d, stray);
    if (*meta_at(d, i) == 0xFF)
      break;
  }
  it->key = pf_any_int(stray);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict: expected a valid dict table, got "
                                 "inconsistent metadata at slot");
  it->key = kept;
  assert_int_dict(d, 100, -1);

  /* 2. a BigInt there: TypeError naming it, nothing moved; the rvalue value keeps its object */
  g_destroyed = 0;
  pf_object_t* big = fake_bigint();
  it->key = pf_any_object(big);
  pf_object_t* obj = counted_new();
  pf_object_t* handle = obj;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  ck_assert_int_eq(pf_dict_set(d, &k, &ref), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument dict: expected a dict whose keys packfn "
                                "can hash, got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  ck_assert_uint_eq(pf_object_strong_count(big), 1);
  it->key = kept;
  assert_int_dict(d, 100, -1);

  /* the same insert goes through once the chain is sound */
  ck_assert_int_eq(pf_dict_set(d, &k, &ref), 0);
  ck_assert_ptr_null(handle);
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
  ck_assert_ptr_eq(got->v_obj, obj);
  ck_assert_int_eq(pf_dict_erase(d, &k), 1);
  ck_assert_int_eq(g_destroyed, 1);
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 2);
  assert_int_dict(d, 100, -1);
  pf_object_release(d);
}
END_TEST

/* A metadata byte whose jump index has no distance (126 or 127): an error, not a read past
 * the 126-entry table; reads and writes both. */
START_TEST(test_map_bad_jump_index_refused) {
  pf_object_t* d = int_dict(100);
  uint64_t head = home_of(d, 5); /* the head of key 5's chain */
  uint8_t saved = *meta_at(d, head);
  ck_assert_uint_eq(saved & 0x80, 0);
  pf_any_t absent = pf_any_int(int_with_home(d, head)), v = pf_any_int(1);
  for (uint8_t bad = 126; bad <= 127; ++bad) {
    *meta_at(d, head) = bad;
    const pf_any_t* got = &v;
    ck_assert_int_eq(pf_dict_get(d, &absent, &got), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_get: argument dict: expected a valid dict table");
    ck_assert_ptr_null(got);
    ck_assert_int_eq(pf_dict_set(d, &absent, &v), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict");
    ck_assert_int_eq(pf_dict_erase(d, &absent), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_erase: argument dict");
  }
  *meta_at(d, head) = saved;
  assert_int_dict(d, 100, -1);
  /* links that loop (a head to a body to a body back to the first body): the walk is
   * bounded by the size; a link to a slot that is no chain body is refused at once */
  pf_object_t* m;
  ck_assert_int_eq(pf_map_create(&m), 0);
  for (int i = 0; i < 5; ++i) {
    pf_any_t k = pf_any_int(i), x = pf_any_int(-i);
    ck_assert_int_eq(pf_map_set(m, &k, &x), 0);
  }
  ck_assert_uint_eq(cell_of(m)->slots, 8);
  uint64_t h = home_of(m, 0), b = 8, c = 8;
  for (uint64_t i = 0; i < 8; ++i)
    if (*meta_at(m, i) == 0xFF)
      b == 8 ? (void)(b = i) : c == 8 ? (void)(c = i) : (void)0;
  ck_assert_uint_lt(c, 8);
  uint8_t saved_h = *meta_at(m, h);
  item_at(m, b)->key = pf_any_int(-1);
  item_at(m, c)->key = pf_any_int(-2);
  *meta_at(m, h) = (uint8_t)((b - h) & 7);
  *meta_at(m, b) = (uint8_t)(0x80 | ((c - b) & 7));
  *meta_at(m, c) = (uint8_t)(0x80 | ((b - c) & 7));
  pf_any_t miss = pf_any_int(int_with_home(m, h));
  const pf_any_t* got;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument map: expected a valid map table");
  *meta_at(m, b) = 0xFF;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), -1); /* h links to an empty slot */
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument map: expected a valid map table");
  *meta_at(m, c) = 0xFF;
  *meta_at(m, h) = saved_h;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), 0);
  ck_assert_ptr_null(got);
  /* an insertion-order list that loops: a rebuild would repeat entries and lose others */
  test_item_t* first = item_at(m, cell_of(m)->iter_head);
  uint64_t saved_next = first->next;
  first->next = cell_of(m)->iter_head;
  size_t n, before = 0;
  int rc = 0;
  for (int64_t i = 100; i < 110 && rc == 0; ++i) {
    ck_assert_int_eq(pf_map_count(m, &before), 0);
    pf_any_t k = pf_any_int(i), x = pf_any_int(i);
    rc = pf_map_set(m, &k, &x); /* until the table has to grow */
  }
  ck_assert_int_eq(rc, -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_set: argument map: expected a valid map table");
  ck_assert_int_eq(pf_map_count(m, &n), 0);
  ck_assert_uint_eq(n, before);
  first->next = saved_next;
  pf_any_t k = pf_any_int(200), x = pf_any_int(200);
  ck_assert_int_eq(pf_map_set(m, &k, &x), 0);
  ck_assert_int_eq(pf_map_count(m, &n), 0);
  ck_assert_uint_eq(n, before + 1);
  pf_object_release(m);
  pf_object_release(d);
}
END_TEST

/* A small map holding a BigInt (as TVM-FFI's Dict::Set leaves it): packfn appends while the
 * small form has room, refuses the switch to the dense form (which places every key again),
 * refuses BigInt keys of its own, and moves nothing on refusal. */
START_TEST(test_dict_bigint_key_refused) {
  g_destroyed = 0;
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  pf_object_t* big = fake_bigint();
  pf_any_t kb = pf_any_object(big), v = pf_any_int(1);
  ck_assert_int_eq(pf_dict_set(d, &kb, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument key: expected str, bytes, int or Object, "
                                "got BigInt, which TVM-FFI hashes with a registered __any_hash__");
  /* put it there as TVM-FFI would: the small form is searched in order, no hash */
  test_mapcell_t* c = cell_of(d);
  test_kv_t* kv = (test_kv_t*)c->data;
  pf_object_retain(big);
  kv[0].key = kb;
  kv[0].value = pf_any_int(0);
  c->size = 1;
  for (int i = 1; i < 4; ++i) {
    pf_any_t k = pf_any_int(i), x = pf_any_int(i);
    ck_assert_int_eq(pf_dict_set(d, &k, &x), 0);
  }
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(d, &kb, &got), 0); /* found by identity in the small form */
  ck_assert_int_eq(got->v_int64, 0);
  ck_assert_int_eq(pf_dict_set(d, &kb, &v), 0); /* a present key: only its value changes */
  pf_object_t* obj = counted_new();
  pf_object_t* handle = obj;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  pf_any_t k5 = pf_any_int(5);
  ck_assert_int_eq(pf_dict_set(d, &k5, &ref), -1); /* the 5th key: the dense switch */
  PF_ASSERT_RAISED("TypeError", "got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  ck_assert_int_eq(pf_dict_set(d, &ref, &v), -1); /* as the key: the same */
  PF_ASSERT_RAISED("TypeError", "got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  size_t n;
  ck_assert_int_eq(pf_dict_count(d, &n), 0);
  ck_assert_uint_eq(n, 4);
  ck_assert_uint_ne(c->slots >> 63, 0);       /* still small */
  ck_assert_int_eq(pf_dict_erase(d, &kb), 1); /* erasing moves no other key */
  ck_assert_int_eq(pf_dict_set(d, &k5, &ref), 0);
  ck_assert_ptr_null(handle);
  pf_object_release(d);
  ck_assert_int_eq(g_destroyed, 1); /* obj; big still has our reference */
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 2);
}
END_TEST

/* Keys whose hashes differ only in their low bits share one chain at every table size up to
 * 2^56 slots: hash inv * (x + j) for the inverse inv of the Fibonacci multiplier. */
static const uint64_t chain_x = 0x5000000000000000ull;

static uint64_t chain_inverse(void) {
  const uint64_t c = 11400714819323198485ull;
  uint64_t inv = c; /* c's inverse modulo 2^64 (Newton's iteration) */
  for (int i = 0; i < 6; ++i)
    inv *= 2 - c * inv;
  return inv;
}

/* The int key whose hash (int_hash) is h. */
static pf_any_t key_of_hash(uint64_t h) {
  return pf_any_int((int64_t)((h ^ 1) - 0x9e3779b9u - 64));
}

/* Sets keys 0..n-1 of that chain (value 1) in a map (as_map) or dict. */
static void set_chain(pf_object_t* m, int as_map, uint64_t inv, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) {
    pf_any_t k = key_of_hash(inv * (chain_x + j)), v = pf_any_int(1);
    ck_assert_int_eq((as_map ? pf_map_set(m, &k, &v) : pf_dict_set(m, &k, &v)), 0);
  }
}

/* Keys of one hash stay one chain in a table of any size: every later key whose home lies in
 * that chain needs the whole chain moved. A move stopped at 64 keys and doubled the table
 * instead, so 200 such keys and 30 000 ordinary ones took 2^21 slots (150 MB) where TVM-FFI
 * takes 2^15, and more of both ran out of memory (review). The table now stays within one
 * doubling of what its size needs. */
START_TEST(test_long_chains_do_not_grow_the_table) {
  const uint64_t inv = chain_inverse();
  for (int as_map = 0; as_map < 2; ++as_map) {
    pf_object_t* m;
    ck_assert_int_eq(as_map ? pf_map_create(&m) : pf_dict_create(&m), 0);
    set_chain(m, as_map, inv, 200);
    for (int64_t i = 0; i < 30000; ++i) {
      pf_any_t k = pf_any_int(i * 1000003), v = pf_any_int(i);
      ck_assert_int_eq((as_map ? pf_map_set(m, &k, &v) : pf_dict_set(m, &k, &v)), 0);
    }
    ck_assert_uint_le(cell_of(m)->slots, 65536); /* 30 200 keys: 2^15 at 0.99 full, or 2^16 */
    const pf_any_t* got;
    for (int64_t i = 0; i < 30000; i += 7) {
      pf_any_t k = pf_any_int(i * 1000003);
      ck_assert_int_eq((as_map ? pf_map_get(m, &k, &got) : pf_dict_get(m, &k, &got)), 0);
      ck_assert_int_eq(got->v_int64, i);
    }
    for (uint64_t j = 0; j < 200; ++j) {
      pf_any_t k = key_of_hash(inv * (chain_x + j));
      ck_assert_int_eq((as_map ? pf_map_get(m, &k, &got) : pf_dict_get(m, &k, &got)), 0);
      ck_assert_int_eq(got->v_int64, 1);
    }
    size_t n;
    ck_assert_int_eq((as_map ? pf_map_count(m, &n) : pf_dict_count(m, &n)), 0);
    ck_assert_uint_eq(n, 30200);
    pf_object_release(m);
  }
}
END_TEST

/* pf_map_set / pf_dict_set grow the table until the key has a place (TVM-FFI's
 * InsertMaybeReHash), however crowded its chain: never -1 with nothing raised. */
START_TEST(test_map_set_grows_until_placed) {
  /* 200 keys whose hashes differ only in their low bits share one chain at every table size
   * up to 2^56 slots; a new key whose home lies inside that chain needs the chain moved, all
   * 200 of its keys (a move stopped at 64 and the table doubled instead, several times) */
  const uint64_t inv = chain_inverse();
  for (int as_map = 0; as_map < 2; ++as_map) {
    pf_object_t* m;
    ck_assert_int_eq(as_map ? pf_map_create(&m) : pf_dict_create(&m), 0);
    set_chain(m, as_map, inv, 200);
    ck_assert_uint_eq(int_hash(item_at(m, cell_of(m)->iter_head)->key.v_int64), inv * chain_x);
    unsigned bits = 64 - cell_of(m)->fib_shift;
    uint64_t h = inv * (chain_x + (30ull << (64 - bits)));
    pf_object_t* obj = counted_new();
    pf_object_t* handle = obj;
    pf_any_t k = key_of_hash(h);
    pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
    uint64_t slots = cell_of(m)->slots;
    ck_assert_int_eq((as_map ? pf_map_set(m, &k, &ref) : pf_dict_set(m, &k, &ref)), 0);
    PF_ASSERT_NO_ERROR();
    ck_assert_ptr_null(handle);
    ck_assert_uint_le(cell_of(m)->slots, 2 * slots); /* at most once, for room in reach */
    const pf_any_t* got;
    ck_assert_int_eq((as_map ? pf_map_get(m, &k, &got) : pf_dict_get(m, &k, &got)), 0);
    ck_assert_ptr_eq(got->v_obj, obj);
    size_t n;
    ck_assert_int_eq((as_map ? pf_map_count(m, &n) : pf_dict_count(m, &n)), 0);
    ck_assert_uint_eq(n, 201);
    for (uint64_t j = 0; j < 200; ++j) {
      pf_any_t kj = key_of_hash(inv * (chain_x + j));
      ck_assert_int_eq((as_map ? pf_map_contains(m, &kj) : pf_dict_get(m, &kj, &got)), as_map);
      if (!as_map)
        ck_assert_ptr_nonnull(got);
    }
    pf_object_release(m); /* and obj, whose reference moved in */
  }
}
END_TEST

/* Two rvalue references to one handle: its reference can move once, so the call is refused
 * before anything moves (it used to succeed with an error left raised and a none stored). */
START_TEST(test_rvalue_reference_twice_refused) {
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("a string object", 15, &s), 0);
  pf_object_t* handle = s;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  pf_any_t items[3] = {ref, pf_any_int(1), ref};
  pf_object_t* arr = s;
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument items[2]: expected an rvalue "
                                 "reference to its own handle, got the handle of items[0] again");
  ck_assert_ptr_null(arr);
  ck_assert_ptr_eq(handle, s);
  ck_assert_uint_eq(pf_object_strong_count(s), 1);
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  ck_assert_int_eq(pf_dict_set(d, &ref, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: expected an rvalue reference to "
                                 "its own handle, got the handle of key again");
  ck_assert_ptr_eq(handle, s);
  /* the same when the key is there already (the value alone used to take the reference) */
  pf_any_t key = pf_any_object(s);
  ck_assert_int_eq(pf_dict_set(d, &key, &key), 0);
  ck_assert_uint_eq(pf_object_strong_count(s), 3);
  ck_assert_int_eq(pf_dict_set(d, &ref, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: expected an rvalue reference to "
                                 "its own handle, got the handle of key again");
  ck_assert_ptr_eq(handle, s);
  ck_assert_uint_eq(pf_object_strong_count(s), 3);
  ck_assert_int_eq(pf_dict_erase(d, &key), 1); /* 1: erased */
  ck_assert_uint_eq(pf_object_strong_count(s), 1);
  /* two handles of the same object are two references: both move */
  pf_object_retain(s);
  pf_object_t* handle2 = s;
  pf_any_t ref2 = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle2}};
  pf_any_t two[2] = {ref, ref2};
  ck_assert_int_eq(pf_array_create(two, 2, &arr), 0);
  PF_ASSERT_NO_ERROR();
  ck_assert_ptr_null(handle);
  ck_assert_ptr_null(handle2);
  ck_assert_uint_eq(pf_object_strong_count(s), 2);
  pf_object_release(arr);
  pf_object_release(d);
}
END_TEST

/* pf_map_copy copies any map: keys packfn refuses to set (float, bool, none; a BigInt) are
 * copied as they lie, and the copy takes new keys. */
START_TEST(test_map_copy_any_keys) {
  g_destroyed = 0;
  pf_object_t* big = fake_bigint();
  pf_any_t foreign[4] = {pf_any_float(1.5), pf_any_bool(1), pf_any_none(), pf_any_object(big)};
  for (int dense = 0; dense < 2; ++dense) {
    pf_object_t* d;
    ck_assert_int_eq(pf_dict_create(&d), 0);
    test_mapcell_t* c = cell_of(d);
    test_kv_t* kv = (test_kv_t*)c->data; /* the small form, written as TVM-FFI does */
    for (int i = 0; i < 4; ++i) {
      pf_any_retain(&foreign[i]);
      kv[i].key = foreign[i];
      kv[i].value = pf_any_int(i);
    }
    c->size = 4;
    if (dense) { /* packfn cannot place a BigInt: make the table by hand, slot i for key i */
      test_block_t* b = calloc(1, sizeof *b);
      ck_assert_ptr_nonnull(b);
      memset(b->meta, 0xFF, 16);
      for (int i = 0; i < 4; ++i) {
        b->meta[i] = 0x00;
        b->items[i].key = kv[i].key;
        b->items[i].value = kv[i].value;
        b->items[i].prev = i ? (uint64_t)i - 1 : UINT64_MAX;
        b->items[i].next = i < 3 ? (uint64_t)i + 1 : UINT64_MAX;
      }
      c->data = b;
      c->data_deleter = free;
      c->slots = 8;
      c->fib_shift = 61;
      c->iter_head = 0;
      c->iter_tail = 3;
    }
    pf_object_t* copy;
    ck_assert_int_eq(pf_map_copy(d, &copy), 0);
    size_t n;
    ck_assert_int_eq(pf_map_count(copy, &n), 0);
    ck_assert_uint_eq(n, 4);
    pf_map_item_t items[8];
    ck_assert_uint_eq(map_entries(copy, items, 8), 4);
    for (int i = 0; i < 4; ++i) {
      ck_assert_int_eq(items[i].key.type_index, foreign[i].type_index);
      ck_assert_int_eq(items[i].value.v_int64, i);
    }
    ck_assert_uint_eq(pf_object_strong_count(big), 3); /* ours, the dict's, the copy's */
    pf_object_release(d);
    ck_assert_uint_eq(pf_object_strong_count(big), 2);
    /* new keys go in while no stored key has to move: a BigInt among them stops a rebuild */
    pf_any_t k = pf_any_cstr("x"), v = pf_any_int(9);
    int rc = pf_map_set(copy, &k, &v);
    ck_assert_int_eq(rc, dense ? 0 : -1); /* small and full: the dense switch moves them all */
    if (rc != 0)
      PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: expected a map whose keys packfn "
                                    "can hash, got one holding a BigInt key");
    ck_assert_int_eq(pf_map_count(copy, &n), 0);
    ck_assert_uint_eq(n, 4 + (rc == 0));
    pf_object_release(copy);
    ck_assert_uint_eq(pf_object_strong_count(big), 1);
  }
  /* without the BigInt, the copy of float, bool and none keys grows like any map */
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  test_kv_t* kv = (test_kv_t*)cell_of(d)->data;
  for (int i = 0; i < 3; ++i) {
    kv[i].key = foreign[i];
    kv[i].value = pf_any_int(i);
  }
  cell_of(d)->size = 3;
  pf_object_t* copy;
  ck_assert_int_eq(pf_map_copy(d, &copy), 0);
  for (int i = 0; i < 50; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(i);
    ck_assert_int_eq(pf_map_set(copy, &k, &v), 0);
  }
  pf_map_item_t items[60];
  ck_assert_uint_eq(map_entries(copy, items, 60), 53);
  ck_assert_int_eq(items[0].key.type_index, PF_TYPE_FLOAT);
  ck_assert_int_eq(items[1].key.type_index, PF_TYPE_BOOL);
  ck_assert_int_eq(items[2].key.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(items[52].key.v_int64, 49);
  pf_object_release(copy);
  pf_object_release(d);
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

/* Adds this file's tests to the container suite's TCase, in their order. */
/* Iteration over a damaged insertion list (a foreign writer's): a link that loops ends the walk
 * after size entries, and a link to an empty slot ends it there, instead of looping forever or
 * handing out that slot's uninitialised key (review). */
START_TEST(test_dict_iteration_damaged_list_ends) {
  pf_object_t* d = int_dict(100);
  test_mapcell_t* c = cell_of(d);
  ck_assert(!(c->slots >> 63)); /* the dense form */
  test_item_t* tail = item_at(d, c->iter_tail);
  uint64_t saved = tail->next;
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  long n;
  tail->next = c->iter_head; /* the list loops */
  ck_assert_int_eq(pf_map_iter_init(d, &it), 0);
  for (n = 0; n < 1000 && pf_map_iter_next(&it, &k, &v) == 1; ++n)
    ;
  ck_assert_int_eq(n, 100);
  uint64_t empty = 0;
  while (*meta_at(d, empty) != 0xFF)
    ++empty;
  tail->next = empty; /* the list leads to an empty slot */
  ck_assert_int_eq(pf_map_iter_init(d, &it), 0);
  for (n = 0; n < 1000 && pf_map_iter_next(&it, &k, &v) == 1; ++n)
    ck_assert_int_eq(k->type_index, PF_TYPE_INT);
  ck_assert_int_eq(n, 100);
  /* a link past the table whose low half is a slot: read as a slot and a count, it looped */
  tail->next = c->iter_tail | (UINT64_C(1) << 32);
  ck_assert_int_eq(pf_map_iter_init(d, &it), 0);
  for (n = 0; n < 1000 && pf_map_iter_next(&it, &k, &v) == 1; ++n)
    ;
  ck_assert_int_eq(n, 100);
  tail->next = saved;
  assert_int_dict(d, 100, -1);
  pf_object_release(d);
}
END_TEST

/* The slot holding int key v in dense dict d. */
static uint64_t slot_of(pf_object_t* d, int64_t v) {
  for (uint64_t i = 0; i < cell_of(d)->slots; ++i)
    if (*meta_at(d, i) < 0xFE && item_at(d, i)->key.v_int64 == v)
      return i;
  ck_abort_msg("key %lld not in the table", (long long)v);
  return 0;
}

/* An insertion-order link past the table (a foreign writer's damaged list): writes that would
 * follow it are refused with ValueError and change nothing, as for damaged metadata; they wrote
 * past the table (review). */
START_TEST(test_dict_damaged_list_links_refused) {
  pf_object_t* d = int_dict(100);
  test_mapcell_t* c = cell_of(d);
  const uint64_t past = c->slots + 100000;
  pf_any_t v = pf_any_int(1);

  /* the list's tail: a new key is appended there */
  uint64_t saved = c->iter_tail;
  c->iter_tail = past;
  pf_any_t k = pf_any_int(1000);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict: expected a valid dict table, got "
                                 "inconsistent metadata at slot");
  c->iter_tail = saved;
  assert_int_dict(d, 100, -1);

  /* an erased entry's links: it is unlinked through them */
  uint64_t s = slot_of(d, 5);
  saved = item_at(d, s)->prev;
  item_at(d, s)->prev = past;
  k = pf_any_int(5);
  ck_assert_int_eq(pf_dict_erase(d, &k), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_erase: argument dict: expected a valid dict table");
  item_at(d, s)->prev = saved;
  assert_int_dict(d, 100, -1);

  /* a chain of two: erasing its head moves the last entry into the gap, with its links */
  uint64_t head = 0;
  while (!(*meta_at(d, head) < 0x80 && (*meta_at(d, head) & 0x7F) >= 1 &&
           (*meta_at(d, head) & 0x7F) <= 15 &&
           (*meta_at(d, (head + (*meta_at(d, head) & 0x7F)) & (c->slots - 1)) & 0x7F) == 0))
    ck_assert_uint_lt(++head, c->slots);
  uint64_t last = (head + (*meta_at(d, head) & 0x7F)) & (c->slots - 1);
  saved = item_at(d, last)->next;
  item_at(d, last)->next = past;
  k = item_at(d, head)->key;
  ck_assert_int_eq(pf_dict_erase(d, &k), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_erase: argument dict: expected a valid dict table");
  item_at(d, last)->next = saved;
  assert_int_dict(d, 100, -1);

  /* a chain moved aside for a new key whose home is its body */
  uint64_t body = a_body_slot(d);
  saved = item_at(d, body)->next;
  item_at(d, body)->next = past;
  k = pf_any_int(int_with_home(d, body));
  ck_assert_int_eq(pf_dict_set(d, &k, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict: expected a valid dict table");
  item_at(d, body)->next = saved;
  assert_int_dict(d, 100, -1);

  /* sound again: the same writes go through */
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  ck_assert_int_eq(pf_dict_erase(d, &k), 1);
  k = pf_any_int(5);
  ck_assert_int_eq(pf_dict_erase(d, &k), 1);
  assert_int_dict(d, 99, 5);
  pf_object_release(d);
}
END_TEST

#define TEST_SMALL_TAG ((uint64_t)1 << 63)

/* Small forms TVM-FFI may leave: one of 2 slots in storage packfn did not allocate (no data
 * deleter) grows into packfn's 4 slots, leaving that storage as it was; one holding 6 entries
 * (more than packfn's small form holds) is copied whole, in its order. */
START_TEST(test_map_foreign_small_forms) {
  static test_kv_t two[2];
  two[0].key = pf_any_int(1);
  two[0].value = pf_any_int(10);
  two[1].key = pf_any_int(2);
  two[1].value = pf_any_int(20);
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  test_mapcell_t* c = cell_of(d);
  c->data = two;
  c->size = 2;
  c->slots = 2 | TEST_SMALL_TAG;
  c->data_deleter = NULL;
  pf_any_t k = pf_any_int(3), v = pf_any_int(30);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  ck_assert_ptr_ne(c->data, two);
  ck_assert_uint_eq(c->slots, 4 | TEST_SMALL_TAG);
  ck_assert_int_eq(c->data_deleter != NULL, 1);
  ck_assert_int_eq(two[0].key.v_int64, 1); /* untouched */
  ck_assert_int_eq(two[1].value.v_int64, 20);
  for (int i = 1; i <= 3; ++i) {
    pf_any_t q = pf_any_int(i);
    const pf_any_t* got;
    ck_assert_int_eq(pf_dict_get(d, &q, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, 10 * i);
  }
  pf_object_release(d);

  static test_kv_t six[6];
  for (int i = 0; i < 6; ++i) {
    six[i].key = pf_any_int(5 - i);
    six[i].value = pf_any_int(100 + i);
  }
  pf_object_t *m, *copy;
  ck_assert_int_eq(pf_map_create(&m), 0);
  c = cell_of(m);
  c->data = six;
  c->size = 6;
  c->slots = 6 | TEST_SMALL_TAG;
  c->data_deleter = NULL;
  ck_assert_int_eq(pf_map_copy(m, &copy), 0);
  ck_assert_ptr_ne(cell_of(copy)->data, six);
  size_t count = 0;
  ck_assert_int_eq(pf_map_count(copy, &count), 0);
  ck_assert_uint_eq(count, 6);
  pf_map_item_t items[8];
  ck_assert_uint_eq(map_entries(copy, items, 8), 6);
  for (int i = 0; i < 6; ++i) {
    ck_assert_int_eq(items[i].key.v_int64, 5 - i);
    ck_assert_int_eq(items[i].value.v_int64, 100 + i);
  }
  pf_object_release(m);
  /* the copy is open and takes a new key */
  k = pf_any_int(42);
  ck_assert_int_eq(pf_map_set(copy, &k, &v), 0);
  ck_assert_int_eq(pf_map_count(copy, &count), 0);
  ck_assert_uint_eq(count, 7);
  pf_object_release(copy);
}
END_TEST

/* Rvalue references among other items: one whose handle is empty is refused as a NULL object
 * (naming its item), one without a handle too, and nothing moves. */
START_TEST(test_rvalue_reference_to_empty_handle_refused) {
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("a string object", 15, &s), 0);
  pf_object_t* handle = s;
  pf_object_t* empty = NULL;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  pf_any_t ref_empty = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &empty}};
  pf_any_t ref_none = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = NULL}};
  pf_any_t items[3] = {pf_any_int(1), ref, ref_empty};
  pf_object_t* arr = s;
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument items[2]: ObjectRValueRef value "
                                 "with a NULL pointer");
  ck_assert_ptr_null(arr);
  ck_assert_ptr_eq(handle, s); /* put back */
  ck_assert_uint_eq(pf_object_strong_count(s), 1);
  items[2] = ref_none;
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument items[2]: ObjectRValueRef value "
                                 "with a NULL pointer");
  ck_assert_ptr_eq(handle, s);
  pf_object_release(s);
}
END_TEST

/* A Map another runtime made, stored in an array: kept as it is (packfn marks only its own maps
 * frozen), retained once and released with the array. */
START_TEST(test_foreign_map_stored_as_it_is) {
  g_destroyed = 0;
  pf_object_t* fake;
  ck_assert_int_eq(pf_object_alloc(sizeof(test_mapcell_t), PF_TYPE_MAP, counted_deleter, &fake), 0);
  test_mapcell_t* c = cell_of(fake);
  memset((char*)c + sizeof(pf_object_t), 0, sizeof *c - sizeof(pf_object_t));
  c->slots = TEST_SMALL_TAG;
  pf_any_t v = pf_any_object(fake);
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create(&v, 1, &arr), 0);
  ck_assert_uint_eq(pf_object_strong_count(fake), 2);
  ck_assert_int_eq(pf_map_is_frozen(fake), 0);
  const pf_any_t* got;
  ck_assert_int_eq(pf_array_get(arr, 0, &got), 0);
  ck_assert_ptr_eq(got->v_obj, fake);
  pf_object_release(arr);
  ck_assert_int_eq(g_destroyed, 0);
  pf_object_release(fake);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

static int g_kv_freed;
static void count_free_kv(void* data) {
  g_kv_freed++;
  free(data);
}

/* A small form of 2 slots whose storage has its own deleter (TVM-FFI's): growing into packfn's 4
 * slots frees it through that deleter, once. */
START_TEST(test_map_foreign_small_form_with_deleter) {
  test_kv_t* kv = malloc(2 * sizeof *kv);
  ck_assert_ptr_nonnull(kv);
  kv[0].key = pf_any_int(1);
  kv[0].value = pf_any_int(10);
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  test_mapcell_t* c = cell_of(d);
  c->data = kv;
  c->size = 1;
  c->slots = 2 | TEST_SMALL_TAG;
  c->data_deleter = count_free_kv;
  g_kv_freed = 0;
  pf_any_t k = pf_any_int(2), v = pf_any_int(20);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0); /* fits: no growth */
  ck_assert_int_eq(g_kv_freed, 0);
  ck_assert_ptr_eq(c->data, kv);
  k = pf_any_int(3);
  v = pf_any_int(30);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  ck_assert_int_eq(g_kv_freed, 1);
  ck_assert_uint_eq(c->slots, 4 | TEST_SMALL_TAG);
  for (int i = 1; i <= 3; ++i) {
    pf_any_t q = pf_any_int(i);
    const pf_any_t* got;
    ck_assert_int_eq(pf_dict_get(d, &q, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, 10 * i);
  }
  pf_object_release(d);
  ck_assert_int_eq(g_kv_freed, 1);
}
END_TEST

/* A small form holding a key no table can place (a DLTensor* view, a negative type index:
 * another runtime's writing): growing into the dense form would hash it, so the write is refused
 * and the dict left as it was. */
START_TEST(test_map_foreign_unplaceable_small_keys_refused) {
  static const int32_t odd_types[] = {PF_TYPE_DLTENSOR_PTR, -1, PF_TYPE_OBJECT_RVALUE_REF};
  for (size_t n = 0; n < sizeof odd_types / sizeof odd_types[0]; ++n) {
    pf_object_t* d;
    ck_assert_int_eq(pf_dict_create(&d), 0);
    for (int i = 0; i < 3; ++i) {
      pf_any_t k = pf_any_int(i), v = pf_any_int(i);
      ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
    }
    test_mapcell_t* c = cell_of(d);
    test_kv_t* kv = c->data;
    kv[3].key = pf_any_none();
    kv[3].key.type_index = odd_types[n];
    kv[3].value = pf_any_int(3);
    c->size = 4;
    pf_any_t k = pf_any_int(9), v = pf_any_int(9);
    ck_assert_int_eq(pf_dict_set(d, &k, &v), -1);
    PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument dict: expected a dict whose keys packfn "
                                  "can hash");
    ck_assert_uint_eq(c->size, 4);
    ck_assert_uint_eq(c->slots, 4 | TEST_SMALL_TAG);
    ck_assert_ptr_eq(c->data, kv);
    c->size = 3; /* the odd key is no value to release */
    pf_object_release(d);
  }
}
END_TEST

void pf_test_map_foreign_add_tests(TCase* tc) {
  tcase_add_test(tc, test_dict_iteration_damaged_list_ends);
  tcase_add_test(tc, test_dict_damaged_list_links_refused);
  tcase_add_test(tc, test_dict_foreign_chain_refused);
  tcase_add_test(tc, test_map_bad_jump_index_refused);
  tcase_add_test(tc, test_dict_bigint_key_refused);
  tcase_add_test(tc, test_map_set_grows_until_placed);
  tcase_add_test(tc, test_long_chains_do_not_grow_the_table);
  tcase_add_test(tc, test_rvalue_reference_twice_refused);
  tcase_add_test(tc, test_map_copy_any_keys);
  tcase_add_test(tc, test_map_foreign_small_forms);
  tcase_add_test(tc, test_rvalue_reference_to_empty_handle_refused);
  tcase_add_test(tc, test_foreign_map_stored_as_it_is);
  tcase_add_test(tc, test_map_foreign_small_form_with_deleter);
  tcase_add_test(tc, test_map_foreign_unplaceable_small_keys_refused);
}
