/* Tests of the value layer: constructors and the byte layout, every accessor conversion and
 * refusal, views versus owned values, strings and bytes in all forms, equality and hashing. */
#include "pf_test.h"

START_TEST(test_constructors_layout) {
  pf_any_t v = pf_any_int(-5);
  ck_assert_int_eq(v.type_index, PF_TYPE_INT);
  ck_assert_uint_eq(v.zero_padding, 0);
  ck_assert_int_eq(v.v_int64, -5);
  v = pf_any_bool(7);
  ck_assert_int_eq(v.type_index, PF_TYPE_BOOL);
  ck_assert_int_eq(v.v_int64, 1);
  v = pf_any_float(2.5);
  ck_assert_int_eq(v.type_index, PF_TYPE_FLOAT);
  ck_assert_double_eq(v.v_float64, 2.5);
  v = pf_any_none();
  ck_assert_uint_eq(v.v_uint64, 0);
  DLDataType t = {2, 32, 1};
  v = pf_any_dtype(t);
  ck_assert_uint_eq(v.v_uint64 >> 32, 0); /* unused bytes zero */
  ck_assert_int_eq(v.v_dtype.bits, 32);
  DLDevice d = {kDLCPU, 3};
  v = pf_any_device(d);
  ck_assert_int_eq(v.v_device.device_id, 3);
  ck_assert_int_eq(pf_any_ptr(NULL).type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_ptr(&v).type_index, PF_TYPE_OPAQUE_PTR);
  ck_assert_int_eq(pf_any_cstr("x").type_index, PF_TYPE_RAW_STR);
  ck_assert_int_eq(pf_any_cstr(NULL).type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_object(NULL).type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_dltensor(NULL).type_index, PF_TYPE_NONE);
  /* equal values are equal byte for byte */
  pf_any_t a = pf_any_int(9), b = pf_any_int(9);
  ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
}
END_TEST

START_TEST(test_accessor_conversions) {
  int64_t i;
  double f;
  int b;
  pf_any_t v = pf_any_bool(1);
  ck_assert_int_eq(pf_any_as_int(&v, &i), 0);
  ck_assert_int_eq(i, 1);
  ck_assert_int_eq(pf_any_as_float(&v, &f), 0);
  ck_assert_double_eq(f, 1.0);
  v = pf_any_int(3);
  ck_assert_int_eq(pf_any_as_bool(&v, &b), 0);
  ck_assert_int_eq(b, 1);
  ck_assert_int_eq(pf_any_as_float(&v, &f), 0);
  ck_assert_double_eq(f, 3.0);
  v = pf_any_int(0);
  ck_assert_int_eq(pf_any_as_bool(&v, &b), 0);
  ck_assert_int_eq(b, 0);
  v = pf_any_float(1.5);
  ck_assert_int_eq(pf_any_as_float(&v, &f), 0);
  ck_assert_double_eq(f, 1.5);
  void* p = &v;
  v = pf_any_none();
  ck_assert_int_eq(pf_any_as_ptr(&v, &p), 0);
  ck_assert_ptr_null(p);
  v = pf_any_ptr(&b);
  ck_assert_int_eq(pf_any_as_ptr(&v, &p), 0);
  ck_assert_ptr_eq(p, &b);
}
END_TEST

START_TEST(test_accessor_refusals) {
  int64_t i;
  double f;
  int b;
  pf_any_t v = pf_any_float(1.0);
  ck_assert_int_eq(pf_any_as_int(&v, &i), -1);
  PF_ASSERT_RAISED("TypeError", "expected int, got float");
  v = pf_any_cstr("12");
  ck_assert_int_eq(pf_any_as_int(&v, &i), -1);
  PF_ASSERT_RAISED("TypeError", "expected int, got str");
  ck_assert_int_eq(pf_any_as_float(&v, &f), -1);
  PF_ASSERT_RAISED("TypeError", "expected float, got str");
  ck_assert_int_eq(pf_any_as_bool(&v, &b), -1);
  PF_ASSERT_RAISED("TypeError", "expected bool, got str");
  v = pf_any_int(1);
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_any_as_str(&v, &s, &n), -1);
  PF_ASSERT_RAISED("TypeError", "expected str, got int");
  ck_assert_int_eq(pf_any_as_bytes(&v, &s, &n), -1);
  PF_ASSERT_RAISED("TypeError", "expected bytes, got int");
  DLDataType t;
  DLDevice d;
  pf_object_t* o;
  DLTensor* dt;
  void* p;
  ck_assert_int_eq(pf_any_as_dtype(&v, &t), -1);
  PF_ASSERT_RAISED("TypeError", "expected dtype, got int");
  ck_assert_int_eq(pf_any_as_device(&v, &d), -1);
  PF_ASSERT_RAISED("TypeError", "expected Device, got int");
  ck_assert_int_eq(pf_any_as_object(&v, &o), -1);
  PF_ASSERT_RAISED("TypeError", "expected Object, got int");
  ck_assert_int_eq(pf_any_as_dltensor(&v, &dt), -1);
  PF_ASSERT_RAISED("TypeError", "expected Tensor, got int");
  ck_assert_int_eq(pf_any_as_ptr(&v, &p), -1);
  PF_ASSERT_RAISED("TypeError", "expected void*, got int");
  v.type_index = 55; /* unknown index */
  ck_assert_int_eq(pf_any_as_int(&v, &i), -1);
  PF_ASSERT_RAISED("TypeError", "got unknown");
}
END_TEST

START_TEST(test_dltensor_accessor) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  pf_any_t v = pf_any_dltensor(&t);
  DLTensor* out;
  ck_assert_int_eq(pf_any_as_dltensor(&v, &out), 0);
  ck_assert_ptr_eq(out, &t);
  pf_any_t owned;
  ck_assert_int_eq(pf_any_to_owned(&v, &owned), -1);
  PF_ASSERT_RAISED("TypeError", "DLTensor");
  ck_assert_int_eq(owned.type_index, PF_TYPE_NONE);
}
END_TEST

START_TEST(test_small_and_heap_strings) {
  pf_any_t v;
  ck_assert_int_eq(pf_string_create("abcdefg", 7, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_SMALL_STR);
  ck_assert_uint_eq(v.small_str_len, 7);
  ck_assert_int_eq(v.v_bytes[7], 0);
  ck_assert_str_eq(v.v_bytes, "abcdefg");
  pf_any_release(&v);
  ck_assert_int_eq(pf_string_create("abcdefgh", 8, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_STR);
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_any_as_str(&v, &s, &n), 0);
  ck_assert_uint_eq(n, 8);
  ck_assert_str_eq(s, "abcdefgh");
  ck_assert_int_eq(s[8], 0);
  /* one allocation: the text follows the cell */
  ck_assert_ptr_eq(s, (const char*)v.v_obj + sizeof(pf_object_t) + sizeof(pf_string_cell_t));
  pf_any_release(&v);
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_string_create(NULL, 0, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_SMALL_STR);
  ck_assert_uint_eq(v.small_str_len, 0);
  ck_assert_int_eq(pf_string_from_cstr("hello, world", &v), 0);
  ck_assert_int_eq(pf_any_as_str(&v, &s, &n), 0);
  ck_assert_str_eq(s, "hello, world");
  pf_any_release(&v);
}
END_TEST

START_TEST(test_string_bad_input) {
  pf_any_t v;
  ck_assert_int_eq(pf_string_create(NULL, 3, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument data: expected a pointer, got NULL");
  ck_assert_int_eq(pf_string_create(NULL, 30, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument data: expected a pointer, got NULL");
  ck_assert_int_eq(pf_string_create("abc", 3, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument out: expected a pointer, got NULL");
  ck_assert_int_eq(pf_string_create("abcdefghij", 10, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument out: expected a pointer, got NULL");
  ck_assert_int_eq(pf_string_create("x", (size_t)-1, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument size:");
  ck_assert_int_eq(pf_string_from_cstr(NULL, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_from_cstr: argument s");
  pf_object_t* o;
  ck_assert_int_eq(pf_string_object_create("x", (size_t)-1, &o), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_object_create: argument size:");
  ck_assert_int_eq(pf_string_object_create("x", 1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_object_create: argument out");
  ck_assert_int_eq(pf_bytes_create(NULL, 2, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_create: argument data");
  ck_assert_int_eq(pf_bytes_create("x", (size_t)-1, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_create: argument size:");
}
END_TEST

START_TEST(test_cstr_embedded_nul) {
  pf_any_t v;
  ck_assert_int_eq(pf_string_create("ab\0cdefghij", 11, &v), 0);
  const char* s;
  ck_assert_int_eq(pf_any_as_cstr(&v, &s), -1);
  PF_ASSERT_RAISED("ValueError", "NUL");
  pf_any_release(&v);
  ck_assert_int_eq(pf_string_create("a\0b", 3, &v), 0);
  ck_assert_int_eq(pf_any_as_cstr(&v, &s), -1);
  PF_ASSERT_RAISED("ValueError", "offset 1");
  v = pf_any_cstr("fine");
  ck_assert_int_eq(pf_any_as_cstr(&v, &s), 0);
  ck_assert_str_eq(s, "fine");
  v = pf_any_int(2);
  ck_assert_int_eq(pf_any_as_cstr(&v, &s), -1);
  PF_ASSERT_RAISED("TypeError", "expected str");
  ck_assert_ptr_null(s); /* the output is NULL on failure, as every accessor's (review) */
  s = "stale";
  ck_assert_int_eq(pf_string_create("a\0b", 3, &v), 0);
  ck_assert_int_eq(pf_any_as_cstr(&v, &s), -1);
  pf_error_clear();
  ck_assert_ptr_null(s);
  /* a small string whose text is not followed by a NUL (a broken producer's, of 7 bytes or of
   * fewer with a byte left after them): refused, not a text strlen reads past the value */
  for (uint32_t len = 3; len <= 7; len += 4) {
    ck_assert_int_eq(pf_string_create("abcdefg", len, &v), 0);
    ck_assert_int_eq(v.type_index, PF_TYPE_SMALL_STR);
    ck_assert_int_eq(pf_any_as_cstr(&v, &s), 0);
    v.v_bytes[len] = 'x';
    s = "stale";
    ck_assert_int_eq(pf_any_as_cstr(&v, &s), -1);
    PF_ASSERT_RAISED("ValueError", "expected a small string followed by a NUL, got");
    ck_assert_ptr_null(s);
  }
}
END_TEST

START_TEST(test_bytes_forms) {
  pf_any_t v;
  ck_assert_int_eq(pf_bytes_create("\0\1\2", 3, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_SMALL_BYTES);
  const char* d;
  size_t n;
  ck_assert_int_eq(pf_any_as_bytes(&v, &d, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_int_eq(d[2], 2);
  ck_assert_int_eq(pf_bytes_create("0123456789", 10, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_BYTES);
  ck_assert_int_eq(pf_any_as_bytes(&v, &d, &n), 0);
  ck_assert_uint_eq(n, 10);
  pf_any_release(&v);
  pf_byte_array_t arr = {"xyz", 3};
  v = pf_any_byte_array(&arr);
  ck_assert_int_eq(pf_any_as_bytes(&v, &d, &n), 0);
  ck_assert_ptr_eq(d, arr.data);
  /* str and bytes do not mix */
  ck_assert_int_eq(pf_any_as_str(&v, &d, &n), -1);
  PF_ASSERT_RAISED("TypeError", "expected str, got bytes");
}
END_TEST

START_TEST(test_views_to_owned) {
  pf_any_t out;
  pf_any_t view = pf_any_cstr("short");
  ck_assert_int_eq(pf_any_to_owned(&view, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_SMALL_STR);
  view = pf_any_cstr("a string longer than seven bytes");
  ck_assert_int_eq(pf_any_to_owned(&view, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_STR);
  ck_assert_int_eq(pf_any_equal(&out, &view), 1);
  pf_any_t copy;
  ck_assert_int_eq(pf_any_to_owned(&out, &copy), 0); /* retains */
  ck_assert_uint_eq(pf_object_strong_count(out.v_obj), 2);
  pf_any_release(&copy);
  pf_any_release(&out);
  pf_byte_array_t arr = {"0123456789abcdef", 16};
  view = pf_any_byte_array(&arr);
  ck_assert_int_eq(pf_any_to_owned(&view, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_BYTES);
  pf_any_release(&out);
  /* object rvalue reference: the owned value takes the handle's reference */
  pf_object_t* obj;
  ck_assert_int_eq(pf_string_object_create("moved along here", 16, &obj), 0);
  pf_any_t rv = pf_any_none();
  rv.type_index = PF_TYPE_OBJECT_RVALUE_REF;
  rv.v_ptr = &obj;
  ck_assert_int_eq(pf_any_to_owned(&rv, &out), 0);
  ck_assert_ptr_null(obj);
  ck_assert_int_eq(out.type_index, PF_TYPE_STR);
  ck_assert_uint_eq(pf_object_strong_count(out.v_obj), 1);
  pf_any_t moved = pf_any_move(&out);
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  pf_any_release(&moved);
  out = pf_any_int(42); /* none after a failure, also for this one (it kept 42; review) */
  ck_assert_int_eq(pf_any_to_owned(&rv, &out), -1);
  PF_ASSERT_RAISED("ValueError", "NULL handle");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  pf_any_t bad = pf_any_none();
  bad.type_index = 42;
  ck_assert_int_eq(pf_any_to_owned(&bad, &out), -1);
  PF_ASSERT_RAISED("TypeError", "unknown (type index 42)");
  bad.type_index = 13; /* kTVMFFIUnchanged: a value with no payload, copied (it was refused,
                        * against the contract that copies every value type; review) */
  ck_assert_int_eq(pf_any_to_owned(&bad, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_UNCHANGED);
  /* a small string claiming more than its 8 bytes (a broken producer's): refused, not read
   * past its end (review) */
  pf_any_t long_small = pf_any_none();
  long_small.type_index = PF_TYPE_SMALL_STR;
  long_small.small_str_len = 200;
  ck_assert_int_eq(pf_any_to_owned(&long_small, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: a small string of length 200, more than 7");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  const char* text = "unchanged";
  size_t text_size = 99;
  ck_assert_int_eq(pf_any_as_str(&long_small, &text, &text_size), -1);
  PF_ASSERT_RAISED("ValueError", "expected str, got a small string of length 200, more than 7");
  ck_assert_ptr_null(text);
  ck_assert_uint_eq(text_size, 0);
  long_small.type_index = PF_TYPE_SMALL_BYTES;
  ck_assert_int_eq(pf_any_as_bytes(&long_small, &text, &text_size), -1);
  PF_ASSERT_RAISED("ValueError", "expected bytes, got a small bytes of length 200, more than 7");
  pf_any_t empty = pf_any_cstr("");
  ck_assert_int_eq(pf_any_equal(&long_small, &empty), 0); /* compared by bits, not read */
  (void)pf_any_hash(&long_small);
  /* by all its bits, its length among them: not equal to empty small bytes, whose payload is
   * the same, either way round (it was equal one way and not the other, and the two hashed
   * apart) */
  pf_any_t small_empty;
  ck_assert_int_eq(pf_bytes_create("", 0, &small_empty), 0);
  ck_assert_int_eq(small_empty.type_index, long_small.type_index);
  ck_assert_int_eq(pf_any_equal(&small_empty, &long_small), 0);
  ck_assert_int_eq(pf_any_equal(&long_small, &small_empty), 0);
  pf_any_t long_small_too = long_small;
  ck_assert_int_eq(pf_any_equal(&long_small, &long_small_too), 1);
  ck_assert_uint_eq(pf_any_hash(&long_small), pf_any_hash(&long_small_too));
  long_small_too.small_str_len = 100;
  ck_assert_int_eq(pf_any_equal(&long_small, &long_small_too), 0);
  PF_ASSERT_NO_ERROR();
  /* a bool another producer stored as 2 reads as 1 (docs: 0 or 1) */
  pf_any_t two = pf_any_bool(1);
  two.v_int64 = 2;
  int64_t as_int = 0;
  double as_float = 0;
  ck_assert_int_eq(pf_any_as_int(&two, &as_int), 0);
  ck_assert_int_eq(as_int, 1);
  ck_assert_int_eq(pf_any_as_float(&two, &as_float), 0);
  ck_assert(as_float == 1.0);
  int as_bool = 0;
  ck_assert_int_eq(pf_any_as_bool(&two, &as_bool), 0);
  ck_assert_int_eq(as_bool, 1);
  pf_any_t one = pf_any_bool(1), owned_two;
  ck_assert_int_eq(pf_any_equal(&two, &one), 1);
  ck_assert_uint_eq(pf_any_hash(&two), pf_any_hash(&one));
  ck_assert_int_eq(pf_any_to_owned(&two, &owned_two), 0);
  ck_assert_int_eq(owned_two.v_int64, 1);
  /* as a map key, a too-long small string is refused, not hashed past its end (review) */
  pf_object_t* keyed;
  ck_assert_int_eq(pf_map_create(&keyed), 0);
  long_small.type_index = PF_TYPE_SMALL_STR;
  const pf_any_t* found = NULL;
  ck_assert_int_eq(pf_map_get(keyed, &long_small, &found), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_map_get: argument key: a small string of length 200, more than 7");
  pf_any_t val = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(keyed, &long_small, &val), -1);
  PF_ASSERT_RAISED("ValueError", "a small string of length 200, more than 7");
  pf_object_release(keyed);
  /* sources inside *out itself: its own small string, read before *out is written (it was
   * cleared first: the copies came out as NULs or empty; review) */
  pf_any_t self_copy;
  ck_assert_int_eq(pf_string_create("abcdef", 6, &self_copy), 0);
  ck_assert_int_eq(pf_string_create(self_copy.v_bytes, 3, &self_copy), 0);
  ck_assert_uint_eq(self_copy.small_str_len, 3);
  ck_assert_int_eq(memcmp(self_copy.v_bytes, "abc", 4), 0);
  ck_assert_int_eq(pf_string_from_cstr(self_copy.v_bytes, &self_copy), 0);
  ck_assert_int_eq(memcmp(self_copy.v_bytes, "abc", 4), 0);
  ck_assert_int_eq(pf_bytes_create(self_copy.v_bytes, 2, &self_copy), 0);
  ck_assert_int_eq(self_copy.type_index, PF_TYPE_SMALL_BYTES);
  ck_assert_int_eq(memcmp(self_copy.v_bytes, "ab", 2), 0);
  ck_assert_int_eq(pf_string_create("xyz", 3, &self_copy), 0);
  pf_any_t into_self = pf_any_cstr(self_copy.v_bytes);
  ck_assert_int_eq(pf_any_to_owned(&into_self, &self_copy), 0);
  ck_assert_int_eq(self_copy.type_index, PF_TYPE_SMALL_STR);
  ck_assert_uint_eq(self_copy.small_str_len, 3);
  ck_assert_int_eq(memcmp(self_copy.v_bytes, "xyz", 4), 0);
  /* and texts an object holds: *out's own 8 payload bytes, or all 16 of it (the new value was
   * written into *out before the copy, which then copied the value's own bytes; review) */
  const char* got;
  size_t got_size;
  pf_any_t whole = pf_any_int(0x0102030405060708), whole_was = whole;
  ck_assert_int_eq(pf_bytes_create((const char*)&whole.v_int64, 8, &whole), 0);
  ck_assert_int_eq(pf_any_as_bytes(&whole, &got, &got_size), 0);
  ck_assert_uint_eq(got_size, 8);
  ck_assert_int_eq(memcmp(got, &whole_was.v_int64, 8), 0);
  pf_any_release(&whole);
  whole = whole_was;
  ck_assert_int_eq(pf_string_create((const char*)&whole.v_int64, 8, &whole), 0);
  ck_assert_int_eq(pf_any_as_str(&whole, &got, &got_size), 0);
  ck_assert_uint_eq(got_size, 8);
  ck_assert_int_eq(memcmp(got, &whole_was.v_int64, 8), 0);
  pf_any_release(&whole);
  whole = whole_was;
  pf_byte_array_t whole_bytes = {(const char*)&whole, sizeof whole};
  pf_any_t whole_view = pf_any_byte_array(&whole_bytes);
  ck_assert_int_eq(pf_any_to_owned(&whole_view, &whole), 0);
  ck_assert_int_eq(pf_any_as_bytes(&whole, &got, &got_size), 0);
  ck_assert_uint_eq(got_size, sizeof whole);
  ck_assert_int_eq(memcmp(got, &whole_was, sizeof whole), 0);
  pf_any_release(&whole);
  /* the object constructors likewise: the 8 bytes of the handle *out itself */
  pf_object_t* handle = (pf_object_t*)(uintptr_t)0x0102030405060708u;
  pf_object_t* handle_was = handle;
  ck_assert_int_eq(pf_bytes_object_create((const char*)&handle, sizeof handle, &handle), 0);
  pf_any_t held = pf_any_object(handle);
  ck_assert_int_eq(pf_any_as_bytes(&held, &got, &got_size), 0);
  ck_assert_uint_eq(got_size, sizeof handle);
  ck_assert_int_eq(memcmp(got, &handle_was, sizeof handle), 0);
  pf_object_release(handle);
  handle = handle_was;
  ck_assert_int_eq(pf_string_object_create((const char*)&handle, sizeof handle, &handle), 0);
  held = pf_any_object(handle);
  ck_assert_int_eq(pf_any_as_str(&held, &got, &got_size), 0);
  ck_assert_int_eq(memcmp(got, &handle_was, sizeof handle), 0);
  pf_object_release(handle);
  /* a view's copy names pf_any_to_owned, the function called (it named pf_bytes_create) */
  pf_byte_array_t huge = {"x", SIZE_MAX};
  pf_any_t huge_view = pf_any_byte_array(&huge);
  ck_assert_int_eq(pf_any_to_owned(&huge_view, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: ");
  ck_assert_int_eq(pf_any_to_owned(NULL, &out), -1);
  PF_ASSERT_RAISED("ValueError", "view");
  view = pf_any_int(5);
  ck_assert_int_eq(pf_any_to_owned(&view, &out), 0);
  ck_assert_int_eq(out.v_int64, 5);
}
END_TEST

/* a byte-array view too large to copy is refused in terms of pf_any_to_owned's own arguments
 * (it said "pf_any_to_owned: argument size: ...", an argument the function does not have) */
START_TEST(test_to_owned_huge_view_names_no_argument) {
  pf_byte_array_t huge = {"x", SIZE_MAX / 2 + 1};
  pf_any_t view = pf_any_byte_array(&huge), out = pf_any_int(1);
  ck_assert_int_eq(pf_any_to_owned(&view, &out), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "ValueError");
  ck_assert_ptr_null(strstr(pf_error_message(err), "argument size"));
  char want[128];
  snprintf(want, sizeof want,
           "pf_any_to_owned: bytes view (type index 9) of %zu bytes, more than "
           "the %zu",
           huge.size, (size_t)(SIZE_MAX / 2));
  ck_assert_msg(strstr(pf_error_message(err), want) != NULL, "message '%s' lacks '%s'",
                pf_error_message(err), want);
  pf_object_release(err);
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_to_owned(&view, &view), -1); /* in place: none, the view's size kept */
  PF_ASSERT_RAISED("ValueError", "bytes view (type index 9)");
  ck_assert_int_eq(view.type_index, PF_TYPE_NONE);
  ck_assert_uint_eq(huge.size, SIZE_MAX / 2 + 1);
}
END_TEST

/* Another producer's value with non-zero bytes where the ABI has zeros (the padding, none's
 * payload, the bytes after a small string's text or a dtype): the owned copy is the canonical
 * value, byte for byte what packfn's constructors make (it copied the stray bytes, and
 * TVM-FFI, which compares and hashes the 8 payload bytes, saw a different value) */
static void check_owned_is(pf_any_t dirty, pf_any_t clean) {
  pf_any_t out = pf_any_int(7);
  ck_assert_int_eq(pf_any_to_owned(&dirty, &out), 0);
  ck_assert_int_eq(memcmp(&out, &clean, sizeof out), 0);
  ck_assert_int_eq(pf_any_to_owned(&dirty, &dirty), 0); /* in place likewise */
  ck_assert_int_eq(memcmp(&dirty, &clean, sizeof dirty), 0);
  pf_any_release(&out);
  pf_any_release(&dirty);
}

START_TEST(test_to_owned_zeroes_unused_bytes) {
  pf_any_t clean = pf_any_none(), dirty = clean;
  dirty.zero_padding = 3;
  dirty.v_int64 = 1234;
  check_owned_is(dirty, clean);
  clean.type_index = dirty.type_index = PF_TYPE_UNCHANGED;
  check_owned_is(dirty, clean);
  clean = pf_any_int(-5);
  dirty = clean;
  dirty.zero_padding = 0xffffffffu;
  check_owned_is(dirty, clean);
  clean = pf_any_float(2.5);
  dirty = clean;
  dirty.zero_padding = 1;
  check_owned_is(dirty, clean);
  clean = pf_any_bool(1);
  dirty = clean;
  dirty.zero_padding = 1;
  dirty.v_int64 = -1;
  check_owned_is(dirty, clean);
  clean = pf_any_ptr(&clean);
  dirty = clean;
  dirty.zero_padding = 1;
  check_owned_is(dirty, clean);
  DLDataType t = {kDLFloat, 16, 4};
  clean = pf_any_dtype(t);
  dirty = clean;
  dirty.zero_padding = 9;
  memset(dirty.v_bytes + sizeof t, 0xab, sizeof dirty.v_bytes - sizeof t);
  check_owned_is(dirty, clean);
  DLDevice d = {kDLCUDA, 1};
  clean = pf_any_device(d);
  dirty = clean;
  dirty.zero_padding = 9;
  check_owned_is(dirty, clean);
  ck_assert_int_eq(pf_string_create("ab", 2, &clean), 0);
  dirty = clean;
  memcpy(dirty.v_bytes + 2, "XYZUVW", 6); /* no NUL after the text either */
  check_owned_is(dirty, clean);
  ck_assert_int_eq(pf_bytes_create("abcdefg", 7, &clean), 0);
  dirty = clean;
  dirty.v_bytes[7] = 'Q';
  check_owned_is(dirty, clean);
  pf_object_t* obj;
  ck_assert_int_eq(pf_string_object_create("an object", 9, &obj), 0);
  clean = pf_any_object(obj);
  dirty = clean;
  dirty.zero_padding = 5;
  check_owned_is(dirty, clean);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  pf_object_release(obj);
}
END_TEST

/* out may be the view itself: the value is read before out is written */
START_TEST(test_to_owned_in_place) {
  char text[] = "a caller's buffer, longer than seven bytes";
  pf_any_t v = pf_any_cstr(text);
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_STR);
  text[0] = 'X'; /* an owned copy: the buffer no longer matters */
  pf_any_t want = pf_any_cstr("a caller's buffer, longer than seven bytes");
  ck_assert_int_eq(pf_any_equal(&v, &want), 1);
  pf_any_release(&v);
  v = pf_any_cstr("short");
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_SMALL_STR);
  ck_assert_str_eq(v.v_bytes, "short");
  v = pf_any_int(42);
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_INT);
  ck_assert_int_eq(v.v_int64, 42);
  pf_byte_array_t arr = {"0123456789abcdef", 16};
  v = pf_any_byte_array(&arr);
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_int_eq(v.type_index, PF_TYPE_BYTES);
  pf_any_release(&v);
  pf_object_t* obj;
  ck_assert_int_eq(pf_string_object_create("an object, retained", 19, &obj), 0);
  v = pf_any_object(obj);
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_ptr_eq(v.v_obj, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 2);
  pf_any_release(&v);
  pf_object_t* handle = obj; /* an rvalue reference: the object moves out of the handle */
  v = pf_any_none();
  v.type_index = PF_TYPE_OBJECT_RVALUE_REF;
  v.v_ptr = &handle;
  ck_assert_int_eq(pf_any_to_owned(&v, &v), 0);
  ck_assert_ptr_null(handle);
  ck_assert_int_eq(v.type_index, PF_TYPE_STR);
  ck_assert_ptr_eq(v.v_obj, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  pf_any_release(&v);
  DLTensor t;
  memset(&t, 0, sizeof t);
  v = pf_any_dltensor(&t); /* a failure in place leaves none */
  ck_assert_int_eq(pf_any_to_owned(&v, &v), -1);
  PF_ASSERT_RAISED("TypeError", "DLTensor");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
}
END_TEST

/* The accessors with a NULL output (ValueError naming the accessor and the argument, the other
 * outputs zeroed), and objects holding NULL, which packfn never makes but a foreign
 * or hand-made value may (ValueError; string and bytes objects crashed, a tensor object gave
 * the DLTensor at address 24, review). Equality and hashing treat them by their bits. */
START_TEST(test_null_arguments_and_objects) {
  pf_any_t i = pf_any_int(3);
  int64_t iv = 7;
  pf_object_t* ov = (pf_object_t*)&iv;
  DLTensor* tv = (DLTensor*)&iv;
  const char* data = "x";
  size_t size = 9;
  ck_assert_int_eq(pf_any_as_float(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_float: argument out");
  ck_assert_int_eq(pf_any_as_ptr(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_ptr: argument out");
  ck_assert_int_eq(pf_any_as_object(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_object: argument out");
  ck_assert_int_eq(pf_any_as_dltensor(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_dltensor: argument out");
  ck_assert_int_eq(pf_any_as_int(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_int: argument out: expected a pointer, got NULL");
  ck_assert_int_eq(pf_any_as_bool(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_bool: argument out");
  ck_assert_int_eq(pf_any_as_dtype(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_dtype: argument out");
  ck_assert_int_eq(pf_any_as_device(&i, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_device: argument out");
  pf_any_t s = pf_any_cstr("abc");
  size = 9;
  ck_assert_int_eq(pf_any_as_str(&s, NULL, &size), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_str: argument data");
  ck_assert_uint_eq(size, 0);
  data = "x";
  ck_assert_int_eq(pf_any_as_bytes(&s, &data, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_bytes: argument size");
  ck_assert_ptr_null(data);

  pf_any_t str_null = {PF_TYPE_STR, {0}, {.v_obj = NULL}};
  pf_any_t bytes_null = {PF_TYPE_BYTES, {0}, {.v_obj = NULL}};
  pf_any_t tensor_null = {PF_TYPE_TENSOR, {0}, {.v_obj = NULL}};
  pf_any_t dlt_null = {PF_TYPE_DLTENSOR_PTR, {0}, {.v_ptr = NULL}};
  pf_any_t fn_null = {PF_TYPE_FUNCTION, {0}, {.v_obj = NULL}};
  data = "x";
  size = 9;
  ck_assert_int_eq(pf_any_as_str(&str_null, &data, &size), -1);
  PF_ASSERT_RAISED("ValueError", "expected str, got a NULL str object");
  ck_assert_ptr_null(data);
  ck_assert_uint_eq(size, 0);
  ck_assert_int_eq(pf_any_as_cstr(&str_null, &data), -1);
  PF_ASSERT_RAISED("ValueError", "got a NULL str object");
  ck_assert_int_eq(pf_any_as_bytes(&bytes_null, &data, &size), -1);
  PF_ASSERT_RAISED("ValueError", "expected bytes, got a NULL bytes object");
  tv = (DLTensor*)&iv;
  ck_assert_int_eq(pf_any_as_dltensor(&tensor_null, &tv), -1);
  PF_ASSERT_RAISED("ValueError", "expected Tensor, got a NULL Tensor object");
  ck_assert_ptr_null(tv);
  ck_assert_int_eq(pf_any_as_dltensor(&dlt_null, &tv), -1);
  PF_ASSERT_RAISED("ValueError", "expected Tensor, got a DLTensor* view with a NULL pointer");
  ov = (pf_object_t*)&iv;
  ck_assert_int_eq(pf_any_as_object(&fn_null, &ov), -1);
  PF_ASSERT_RAISED("ValueError", "expected Object, got a NULL Function object");
  ck_assert_ptr_null(ov);
  /* a byte-array view of bytes at NULL (data NULL, size > 0): refused, not read (it crashed
   * the hash and reached typed functions, review) */
  pf_byte_array_t at_null = {NULL, 5};
  pf_any_t view_null = pf_any_byte_array(&at_null), view_null2 = view_null;
  data = "x";
  size = 9;
  ck_assert_int_eq(pf_any_as_bytes(&view_null, &data, &size), -1);
  PF_ASSERT_RAISED("ValueError", "expected bytes, got a bytes view with a NULL pointer");
  ck_assert_ptr_null(data);
  ck_assert_uint_eq(size, 0);
  pf_any_t owned = pf_any_int(1);
  ck_assert_int_eq(pf_any_to_owned(&view_null, &owned), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: bytes view (type index 9) of 5 bytes");
  ck_assert_int_eq(owned.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_equal(&view_null, &view_null2), 1);
  ck_assert_uint_eq(pf_any_hash(&view_null), pf_any_hash(&view_null2));
  pf_byte_array_t empty_at_null = {NULL, 0}; /* no bytes: an empty bytes value */
  pf_any_t empty_view = pf_any_byte_array(&empty_at_null);
  ck_assert_int_eq(pf_any_as_bytes(&empty_view, &data, &size), 0);
  ck_assert_uint_eq(size, 0);
  /* equality and hashing never raise: such a value is equal only to the same bits */
  pf_any_t str_null2 = str_null, empty = pf_any_cstr("");
  ck_assert_int_eq(pf_any_equal(&str_null, &str_null2), 1);
  ck_assert_int_eq(pf_any_equal(&str_null, &empty), 0);
  ck_assert_int_eq(pf_any_equal(&bytes_null, &str_null), 0);
  ck_assert_uint_eq(pf_any_hash(&str_null), pf_any_hash(&str_null2));
  (void)pf_any_hash(&bytes_null);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Constructors set their output on failure (none or NULL), so a caller releasing it after a
 * failure releases nothing (some left it as it was). */
START_TEST(test_failed_constructors_clear_out) {
  pf_any_t v = pf_any_int(5);
  ck_assert_int_eq(pf_string_create(NULL, 10, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument data");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  v = pf_any_int(5);
  ck_assert_int_eq(pf_string_create("x", SIZE_MAX, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_create: argument size: expected at most");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  v = pf_any_int(5);
  ck_assert_int_eq(pf_string_from_cstr(NULL, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_from_cstr: argument s");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  v = pf_any_int(5);
  ck_assert_int_eq(pf_bytes_create(NULL, 10, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_create: argument data");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  v = pf_any_int(5);
  ck_assert_int_eq(pf_bytes_create("x", SIZE_MAX, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_create: argument size");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE);
  pf_object_t* o = (pf_object_t*)&v;
  ck_assert_int_eq(pf_string_object_create("x", SIZE_MAX / 2, &o), -1); /* no memory for it */
  PF_ASSERT_RAISED("MemoryError", "pf_string_object_create");
  ck_assert_ptr_null(o); /* it was left (review) */
  v = pf_any_int(5);
  ck_assert_int_eq(pf_any_to_owned(NULL, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: argument view");
  ck_assert_int_eq(v.type_index, PF_TYPE_NONE); /* it was left (review) */
  o = (pf_object_t*)&v;
  ck_assert_int_eq(pf_string_object_create(NULL, 3, &o), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_object_create: argument data");
  ck_assert_ptr_null(o);
  o = (pf_object_t*)&v;
  ck_assert_int_eq(pf_bytes_object_create("x", SIZE_MAX, &o), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_object_create: argument size");
  ck_assert_ptr_null(o);
}
END_TEST

/* A raw string or byte-array pointer Any with a NULL pointer (pf_any_cstr and
 * pf_any_byte_array never make one, a hand-made Any can): ValueError, no crash. */
START_TEST(test_null_views) {
  pf_any_t ba = pf_any_none(), rs = pf_any_none(), out = pf_any_int(1);
  ba.type_index = PF_TYPE_BYTE_ARRAY_PTR;
  rs.type_index = PF_TYPE_RAW_STR;
  ck_assert_int_eq(pf_any_to_owned(&ba, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: bytes view (type index 9) with a NULL pointer");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_any_to_owned(&rs, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: str view (type index 8) with a NULL pointer");
  const char* data = "x";
  size_t size = 9;
  ck_assert_int_eq(pf_any_as_bytes(&ba, &data, &size), -1);
  PF_ASSERT_RAISED("ValueError", "expected bytes, got a bytes view with a NULL pointer");
  ck_assert_ptr_null(data);
  ck_assert_uint_eq(size, 0);
  data = "x";
  ck_assert_int_eq(pf_any_as_str(&rs, &data, &size), -1);
  PF_ASSERT_RAISED("ValueError", "expected str, got a str view with a NULL pointer");
  ck_assert_ptr_null(data);
  ck_assert_int_eq(pf_any_as_cstr(&rs, &data), -1);
  PF_ASSERT_RAISED("ValueError", "NULL pointer");
  /* equality and hashing never raise: such a view is equal only to the same bits */
  pf_any_t empty_str = pf_any_cstr(""), ba2 = ba;
  ck_assert_int_eq(pf_any_equal(&rs, &empty_str), 0);
  ck_assert_int_eq(pf_any_equal(&ba, &ba2), 1);
  ck_assert_uint_eq(pf_any_hash(&ba), pf_any_hash(&ba2));
  (void)pf_any_hash(&rs);
  PF_ASSERT_NO_ERROR();
  /* containers refuse them too */
  pf_object_t* arr = NULL;
  ck_assert_int_eq(pf_array_create(&ba, 1, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "NULL pointer");
  ck_assert_ptr_null(arr);
}
END_TEST

START_TEST(test_equality_and_hash) {
  pf_any_t small, heap, raw = pf_any_cstr("abc");
  ck_assert_int_eq(pf_string_create("abc", 3, &small), 0);
  ck_assert_int_eq(pf_string_object_create("abc", 3, &heap.v_obj), 0);
  heap.type_index = PF_TYPE_STR;
  heap.zero_padding = 0;
  ck_assert_int_eq(pf_any_equal(&small, &raw), 1);
  ck_assert_int_eq(pf_any_equal(&small, &heap), 1);
  ck_assert_uint_eq(pf_any_hash(&small), pf_any_hash(&heap));
  ck_assert_uint_eq(pf_any_hash(&raw), pf_any_hash(&heap));
  pf_any_t other = pf_any_cstr("abd");
  ck_assert_int_eq(pf_any_equal(&small, &other), 0);
  pf_any_t bytes;
  ck_assert_int_eq(pf_bytes_create("abc", 3, &bytes), 0);
  ck_assert_int_eq(pf_any_equal(&small, &bytes), 0);
  pf_any_release(&heap);
  pf_any_t i1 = pf_any_int(1), b1 = pf_any_bool(1), f1 = pf_any_float(1.0);
  ck_assert_int_eq(pf_any_equal(&i1, &b1), 0);
  ck_assert_int_eq(pf_any_equal(&i1, &f1), 0);
  pf_any_t i1b = pf_any_int(1);
  ck_assert_int_eq(pf_any_equal(&i1, &i1b), 1);
  ck_assert_uint_eq(pf_any_hash(&i1), pf_any_hash(&i1b));
  pf_any_t z = pf_any_float(0.0), nz = pf_any_float(-0.0);
  ck_assert_int_eq(pf_any_equal(&z, &nz), 1);
  ck_assert_uint_eq(pf_any_hash(&z), pf_any_hash(&nz));
  pf_any_t n1 = pf_any_none(), n2 = pf_any_none();
  ck_assert_int_eq(pf_any_equal(&n1, &n2), 1);
  ck_assert_uint_eq(pf_hash_bytes("abcdefghijklmnopqrstuvwxyz0", 27),
                    pf_hash_bytes("abcdefghijklmnopqrstuvwxyz0", 27));
  ck_assert_uint_ne(pf_hash_bytes("abcdefghijklmnopqrstuvwxyz0", 27),
                    pf_hash_bytes("abcdefghijklmnopqrstuvwxyz1", 27));
  ck_assert_int_eq(pf_any_equal(NULL, NULL), 1);
}
END_TEST

/* TVM-FFI's Unchanged marker has no payload, as none: two of them are equal and hash alike
 * whatever another producer left in the payload (they were compared by the payload bits) */
START_TEST(test_unchanged_equal_whatever_its_payload) {
  pf_any_t a = pf_any_none(), b = pf_any_none();
  a.type_index = b.type_index = PF_TYPE_UNCHANGED;
  b.v_int64 = 0x5a5a;
  ck_assert_int_eq(pf_any_equal(&a, &b), 1);
  ck_assert_uint_eq(pf_any_hash(&a), pf_any_hash(&b));
  pf_any_t none = pf_any_none();
  ck_assert_int_eq(pf_any_equal(&a, &none), 0); /* still a type of its own */
  none.v_int64 = 0x5a5a;
  ck_assert_int_eq(pf_any_equal(&none, &b), 0);
}
END_TEST

START_TEST(test_type_names) {
  pf_any_t v = pf_any_int(1);
  ck_assert_str_eq(pf_any_type_name(&v), "int");
  v = pf_any_float(1);
  ck_assert_str_eq(pf_any_type_name(&v), "float");
  v = pf_any_cstr("s");
  ck_assert_str_eq(pf_any_type_name(&v), "str");
  v.type_index = PF_TYPE_TENSOR;
  ck_assert_str_eq(pf_any_type_name(&v), "Tensor");
  v.type_index = PF_TYPE_FUNCTION;
  ck_assert_str_eq(pf_any_type_name(&v), "Function");
}
END_TEST

/* ---- refusals, equality and hashing the tests above leave out (issue 10, coverage) ---- */

START_TEST(test_refusals_without_expected_or_value) {
  pf_any_t i = pf_any_int(3);
  ck_assert_int_eq(pf_any_type_error(&i, NULL), -1);
  PF_ASSERT_RAISED("TypeError", "expected a value, got int");
  ck_assert_int_eq(pf_any_type_error(NULL, "str"), -1);
  PF_ASSERT_RAISED("TypeError", "expected str, got NULL");
  pf_object_t* o = (pf_object_t*)&i;
  ck_assert_int_eq(pf_bytes_object_create(NULL, 3, &o), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_object_create: argument data");
  ck_assert_ptr_null(o);
  ck_assert_int_eq(pf_bytes_object_create("abc", 3, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_object_create: argument out");
  ck_assert_int_eq(pf_bytes_object_create(NULL, 0, &o), 0); /* no bytes: an empty one */
  ck_assert_int_eq(o->type_index, PF_TYPE_BYTES);
  pf_any_t ov = pf_any_object(o);
  const char* data = "x";
  size_t size = 9;
  ck_assert_int_eq(pf_any_as_bytes(&ov, &data, &size), 0);
  ck_assert_uint_eq(size, 0);
  ck_assert_int_eq(data[0], '\0');
  pf_object_release(o);
  ck_assert_int_eq(pf_bytes_create("abc", 3, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_bytes_create: argument out");
  ck_assert_int_eq(pf_string_from_cstr("abc", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_string_from_cstr: argument out");
  /* an accessor given neither value nor output (its fast path checks only the output; a NULL v
   * alone is documented as unchecked) names v */
  ck_assert_int_eq(pf_any_as_int(NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_as_int: argument v: expected a pointer, got NULL");
  /* a string object outlived by a weak reference: its block goes with the last one */
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("weakly held", 11, &s), 0);
  pf_object_weak_retain(s);
  pf_object_release(s);
  ck_assert_int_eq(pf_object_weak_lock(s), 0);
  pf_object_weak_release(s);
}
END_TEST

START_TEST(test_to_owned_broken_small_bytes_and_rvalues) {
  pf_any_t b = pf_any_none(), out = pf_any_int(1);
  b.type_index = PF_TYPE_SMALL_BYTES;
  b.small_str_len = 9;
  ck_assert_int_eq(pf_any_to_owned(&b, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_any_to_owned: a small bytes of length 9, more than 7");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  /* an rvalue reference without a handle, and one to a NULL handle */
  pf_any_t rv = pf_any_none();
  rv.type_index = PF_TYPE_OBJECT_RVALUE_REF;
  out = pf_any_int(1);
  ck_assert_int_eq(pf_any_to_owned(&rv, &out), -1);
  PF_ASSERT_RAISED("ValueError", "rvalue reference to a NULL handle");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  pf_object_t* handle = NULL;
  rv.v_ptr = &handle;
  out = pf_any_int(1);
  ck_assert_int_eq(pf_any_to_owned(&rv, &out), -1);
  PF_ASSERT_RAISED("ValueError", "rvalue reference to a NULL handle");
  /* one to an object moves it: the handle is emptied, the reference is the caller's */
  ck_assert_int_eq(pf_string_object_create("moved string", 12, &handle), 0);
  pf_object_t* obj = handle;
  ck_assert_int_eq(pf_any_to_owned(&rv, &out), 0);
  ck_assert_ptr_null(handle);
  ck_assert_ptr_eq(out.v_obj, obj);
  ck_assert_int_eq(out.type_index, PF_TYPE_STR);
  pf_any_release(&out);
  /* a bytes view of no bytes at NULL: an empty bytes value */
  pf_byte_array_t none_at_all = {NULL, 0};
  pf_any_t empty_view = pf_any_byte_array(&none_at_all);
  out = pf_any_int(1);
  ck_assert_int_eq(pf_any_to_owned(&empty_view, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_SMALL_BYTES);
  ck_assert_int_eq(out.small_str_len, 0);
}
END_TEST

START_TEST(test_equality_of_edge_values) {
  pf_any_t e1 = pf_any_cstr(""), e2, e3;
  ck_assert_int_eq(pf_string_create("", 0, &e2), 0);
  ck_assert_int_eq(pf_any_equal(&e1, &e2), 1);
  ck_assert_uint_eq(pf_any_hash(&e1), pf_any_hash(&e2));
  pf_byte_array_t none_at_all = {NULL, 0};
  e3 = pf_any_byte_array(&none_at_all);
  ck_assert_int_eq(pf_any_equal(&e1, &e3), 0); /* a string is no bytes, even empty */
  pf_any_t b0;
  ck_assert_int_eq(pf_bytes_create(NULL, 0, &b0), 0);
  ck_assert_int_eq(pf_any_equal(&e3, &b0), 1);
  ck_assert_uint_eq(pf_any_hash(&e3), pf_any_hash(&b0));
  /* a byte-array pointer Any without its array: no bytes, compared by its bits */
  pf_any_t noarr = pf_any_none(), noarr2;
  noarr.type_index = PF_TYPE_BYTE_ARRAY_PTR;
  noarr2 = noarr;
  ck_assert_int_eq(pf_any_equal(&noarr, &b0), 0);
  ck_assert_int_eq(pf_any_equal(&noarr, &noarr2), 1);
  /* broken small strings (longer than 7): equal only with the same length and bits */
  pf_any_t s1 = pf_any_none(), s2;
  s1.type_index = PF_TYPE_SMALL_STR;
  s1.small_str_len = 9;
  s1.v_uint64 = 0x4142;
  s2 = s1;
  ck_assert_int_eq(pf_any_equal(&s1, &s2), 1);
  s2.v_uint64 = 0x4143;
  ck_assert_int_eq(pf_any_equal(&s1, &s2), 0);
  s2 = s1;
  s2.small_str_len = 10;
  ck_assert_int_eq(pf_any_equal(&s1, &s2), 0);
  /* data types differ by code, bits or lanes */
  DLDataType f32 = {kDLFloat, 32, 1}, i32 = {kDLInt, 32, 1}, f16 = {kDLFloat, 16, 1},
             f32x4 = {kDLFloat, 32, 4};
  pf_any_t d = pf_any_dtype(f32), dc = pf_any_dtype(i32), db = pf_any_dtype(f16),
           dl = pf_any_dtype(f32x4), ds = pf_any_dtype(f32);
  ck_assert_int_eq(pf_any_equal(&d, &ds), 1);
  ck_assert_int_eq(pf_any_equal(&d, &dc), 0);
  ck_assert_int_eq(pf_any_equal(&d, &db), 0);
  ck_assert_int_eq(pf_any_equal(&d, &dl), 0);
  ck_assert_uint_ne(pf_any_hash(&d), pf_any_hash(&dl));
  /* floats: nonzero ones hash by their bits */
  pf_any_t x = pf_any_float(1.5), y = pf_any_float(1.5), w = pf_any_float(2.5);
  ck_assert_uint_eq(pf_any_hash(&x), pf_any_hash(&y));
  ck_assert_uint_ne(pf_any_hash(&x), pf_any_hash(&w));
  ck_assert_int_eq(pf_any_equal(&x, &w), 0);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("any");
  TCase* tc = tcase_create("core");
  tcase_add_test(tc, test_constructors_layout);
  tcase_add_test(tc, test_accessor_conversions);
  tcase_add_test(tc, test_accessor_refusals);
  tcase_add_test(tc, test_dltensor_accessor);
  tcase_add_test(tc, test_small_and_heap_strings);
  tcase_add_test(tc, test_string_bad_input);
  tcase_add_test(tc, test_cstr_embedded_nul);
  tcase_add_test(tc, test_bytes_forms);
  tcase_add_test(tc, test_views_to_owned);
  tcase_add_test(tc, test_to_owned_in_place);
  tcase_add_test(tc, test_to_owned_huge_view_names_no_argument);
  tcase_add_test(tc, test_to_owned_zeroes_unused_bytes);
  tcase_add_test(tc, test_null_views);
  tcase_add_test(tc, test_null_arguments_and_objects);
  tcase_add_test(tc, test_failed_constructors_clear_out);
  tcase_add_test(tc, test_equality_and_hash);
  tcase_add_test(tc, test_unchanged_equal_whatever_its_payload);
  tcase_add_test(tc, test_type_names);
  tcase_add_test(tc, test_refusals_without_expected_or_value);
  tcase_add_test(tc, test_to_owned_broken_small_bytes_and_rvalues);
  tcase_add_test(tc, test_equality_of_edge_values);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
