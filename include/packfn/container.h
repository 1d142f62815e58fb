/* packfn containers: shapes (69), immutable arrays of values (71), mutable lists (75), and hash
 * maps (72) and dicts (76) in TVM-FFI's layout keyed by strings, bytes, ints and objects, with
 * their C API to build, read, iterate and compare. */
#ifndef PACKFN_CONTAINER_H_
#define PACKFN_CONTAINER_H_

#include "packfn/any.h"
#include "packfn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ownership and lifetime ----
 * Containers own their contents: building one turns every value given as a view into an owned
 * value (pf_any_to_owned: objects are retained, raw strings become small strings or string
 * objects), and the container's last release releases each of them exactly once.
 * Getters hand out borrowed pointers into the container, valid while it lives (and, for a map
 * still being built, until its next pf_map_set).
 * Storing a packfn map in any container freezes it (an item of an array or a list, a key or
 * value of a map or a dict, an entry pf_map_copy copies), so maps and arrays stored in
 * containers never change again and are safe to share between threads. Dicts and lists change
 * in place, so a dict or list can hold itself through other containers (d["a"] = [d]; a list,
 * map or dict is refused as its own direct element, ValueError): such a cycle keeps itself
 * alive, as any reference cycle does under reference counting, until it is broken
 * (pf_dict_erase, pf_list_clear).
 * pf_container_equal ends on cycles. */

/* ---- shape (type 69): a run of int64 extents, the ABI's pf_shape_cell_t ---- */

/* Creates a shape holding a copy of dims[0..ndim) (any values; a tensor layer checks its own
 * rules), stored inline in the same allocation. dims may be NULL when ndim is 0.
 * New reference in *out. -1 with ValueError (NULL out, NULL dims with ndim > 0, an ndim whose
 * byte size overflows) or MemoryError; *out is then NULL. */
PF_API int pf_shape_create(const int64_t* dims, size_t ndim, pf_object_t** out);

/* The extents of a shape (or of any object deriving from it), borrowed for the shape's
 * lifetime: *dims (non-NULL, even for 0 extents) and *ndim. Works on shapes made by any runtime
 * following the ABI. -1 with TypeError (not a shape) or ValueError (NULL outputs); the
 * outputs are then NULL and 0. */
PF_API int pf_shape_data(const pf_object_t* shape, const int64_t** dims, size_t* ndim);

/* Extent `index` of a shape into *out. -1 with TypeError (not a shape), ValueError (NULL out)
 * or IndexError naming the index and the number of extents; *out is then 0. */
PF_API int pf_shape_get(const pf_object_t* shape, int64_t index, int64_t* out);

/* ---- array (type 71): an immutable sequence of owned values, the ABI's pf_seq_cell_t ----
 * The values sit inline after the cell (data_deleter NULL, capacity == size). */

/* Creates an array from `count` values given as views (each made owned, see above; a map among
 * them is frozen). items may be NULL when count is 0. New reference in *out.
 * -1 with TypeError naming the item without an owned form (a DLTensor pointer, an unknown
 * value type), ValueError (NULL out, NULL items with count > 0, an object value with a NULL
 * pointer, a small string or bytes whose length says more than 7, a count whose size
 * overflows) or MemoryError; nothing is retained or moved then
 * (an object rvalue reference among the items keeps its object) and *out is NULL. */
PF_API int pf_array_create(const pf_any_t* items, size_t count, pf_object_t** out);

/* Creates an array that takes the owned values items[0..count) as they are (no retain): on
 * success each items[i] is left none. For results of calls and of *_create. Views (raw
 * strings, byte-array and DLTensor pointers, rvalue references) are refused with TypeError
 * naming the item. Failure as pf_array_create; the items are then untouched (still yours). */
PF_API int pf_array_create_take(pf_any_t* items, size_t count, pf_object_t** out);

/* Number of values of an array or list (made by any runtime following the ABI) into *out.
 * -1 with TypeError (not an array) or ValueError (NULL out); *out is then 0. */
PF_API int pf_array_count(const pf_object_t* array, size_t* out);

/* Value `index` of an array, borrowed (valid while the array lives) into *out.
 * -1 with TypeError (not an array), ValueError (NULL out) or IndexError naming the index and
 * the size; *out is then NULL. */
PF_API int pf_array_get(const pf_object_t* array, int64_t index, const pf_any_t** out);

/* All values of an array for iteration: *items points at *count consecutive owned values,
 * borrowed while the array lives (non-NULL even when empty):
 *   for (size_t i = 0; i < count; ++i) use(&items[i]);
 * -1 with TypeError (not an array) or ValueError (NULL outputs); outputs then NULL and 0. */
PF_API int pf_array_items(const pf_object_t* array, const pf_any_t** items, size_t* count);

/* ---- list (type 75): a mutable sequence, TVM-FFI's ListObj layout (pf_seq_cell_t) ----
 * The values live in a separate buffer that grows as values are added; TVM-FFI's ffi::List
 * reads and changes a packfn list and packfn a TVM-FFI one (docs/interop.md). pf_array_count,
 * pf_array_get and pf_array_items read lists too (borrowed values stay valid until the list
 * next changes). A list is not thread-safe: one writer at a time, and no readers meanwhile.
 * Unlike ffi::Array, a list is changed in place whoever else holds it (no copy on write). */

/* Creates an empty list. New reference in *out. -1 with ValueError (NULL out) or MemoryError;
 * *out is then NULL. */
PF_API int pf_list_create(pf_object_t** out);

/* Appends an owned copy of `value` (as pf_array_create makes one; a map among them is
 * frozen). -1 with TypeError (not a list, a value without an owned form), ValueError (NULL
 * value; the list itself, or an rvalue reference to it) or MemoryError; the list is then
 * unchanged and nothing is retained or moved. */
PF_API int pf_list_append(pf_object_t* list, const pf_any_t* value);

/* Inserts an owned copy of `value` before position index (0 <= index <= size; size appends).
 * Failure as pf_list_append, or IndexError for an index out of that range. */
PF_API int pf_list_insert(pf_object_t* list, int64_t index, const pf_any_t* value);

/* Replaces value `index` (0 <= index < size) with an owned copy of `value`, releasing the old
 * one. Failure as pf_list_insert; the list is then unchanged. */
PF_API int pf_list_set(pf_object_t* list, int64_t index, const pf_any_t* value);

/* Removes value `index` (negative counts from the end: -1 is the last) and moves it into *out
 * (owned: release it). -1 with TypeError (not a list), ValueError (NULL out) or IndexError
 * (out of range, an empty list); *out is then none. */
PF_API int pf_list_pop(pf_object_t* list, int64_t index, pf_any_t* out);

/* Removes and releases every value (the buffer stays for reuse). -1 with TypeError when list
 * is not a list. */
PF_API int pf_list_clear(pf_object_t* list);

/* ---- map (type 72) and dict (76): hash maps in TVM-FFI's layout ----
 * Both have TVM-FFI 0.1.x's MapBaseObj layout (tvm/ffi/container/map_base.h): a small form of
 * at most 4 entries searched in order, and a dense form (16-slot blocks with one metadata byte
 * per slot, Fibonacci hashing, chained slots and an insertion-order list) that a map switches to
 * in place on its 5th key. Keys hash and compare as TVM-FFI's AnyHash / AnyEqual do, so either
 * runtime finds keys in, iterates and writes the other's maps.
 * Keys are strings (raw, small or object: equal contents are the same key whatever the form),
 * bytes (likewise), ints, or objects (the same object, by identity). Other key types (bool,
 * float, none, pointers...) are refused with TypeError. Values are any value with an owned
 * form. Iteration follows insertion order (an erase in the small form closes the gap; in the
 * dense form an erase keeps the order of the rest).
 * Keys TVM-FFI hashes through a registered __any_hash__ (its BigInt, type 78, and any type the
 * joined TVM-FFI lists) have a hash packfn cannot compute: packfn's lookups may miss them in
 * the dense form; it refuses them as new keys (TypeError), and refuses with TypeError, changing
 * nothing, a write into a map holding one that would place stored keys again (the switch to the
 * dense form, a growth) or move the chain such a key heads. A dense table whose metadata no
 * TVM-FFI map can have (a jump index of 126 or more, a chain that loops or leads nowhere) is
 * refused with ValueError by every lookup and write, which then change nothing.
 *
 * Copy-on-write (the rule of TVM-FFI's ffi::Map and ffi::Array): a Map is a value. packfn
 * builds one with pf_map_create and pf_map_set in place, then it is frozen explicitly
 * (pf_map_freeze) or by being stored in a container, and never changes again through packfn;
 * pf_map_copy makes an open copy of any map or dict (frozen, or made by TVM-FFI) to change —
 * the copy ffi::Map::Set makes implicitly when its map is shared. (TVM-FFI's C++ changes a map
 * in place when its handle holds the only reference, packfn's included: a frozen packfn map
 * must not be handed to C++ as its sole reference if its content matters.)
 * A Dict is a shared mutable object, as TVM-FFI's ffi::Dict: pf_dict_set / pf_dict_erase
 * change it in place, whoever made it, and every holder sees the change. Neither is
 * thread-safe while changing; a map that no one changes may be read from any thread. */

/* Creates an empty map, open for pf_map_set. New reference in *out.
 * -1 with ValueError (NULL out) or MemoryError; *out is then NULL. */
PF_API int pf_map_create(pf_object_t** out);

/* Sets map[key] = value in place; both are views, copied to owned values. A new key goes last
 * in the iteration order; an existing key keeps its place and its stored key, and the old value
 * is released. A packfn map given as the value or the key is frozen. The table grows as often
 * as a new key needs to find a place.
 * -1 with TypeError (map not an open packfn Map: frozen, made elsewhere, or not a map; key of
 * an unsupported type or hashed by TVM-FFI's __any_hash__; value without an owned form; a write
 * that would move a stored key hashed by __any_hash__), ValueError (NULL key or value; the map
 * itself as key or value; key and value both rvalue references to one handle; a broken table,
 * see above) or MemoryError; the map is then unchanged and nothing is retained or moved (an
 * rvalue reference keeps its object). */
PF_API int pf_map_set(pf_object_t* map, const pf_any_t* key, const pf_any_t* value);

/* Freezes a packfn map: later pf_map_set calls fail with TypeError. Freezing twice is fine.
 * -1 with TypeError when map is not a Map made by packfn. */
PF_API int pf_map_freeze(pf_object_t* map);

/* 1 when the map is a frozen packfn map, 0 when it is open or not a packfn Map (a dict, a map
 * made by TVM-FFI, any other object, NULL). Never raises. */
PF_API int pf_map_is_frozen(const pf_object_t* map);

/* Copies any map or dict (made by any runtime) into a new open packfn Map with the same entries
 * in the same order (keys and values retained): the copy-on-write step. The table is copied as
 * it lies (no key is hashed again), so keys of every type are copied, including those
 * pf_map_set refuses (float, bool, none, BigInt); the packfn maps among keys and values are
 * frozen. New reference in *out.
 * -1 with TypeError (not a Map or Dict), ValueError (NULL out) or MemoryError; *out is then
 * NULL. */
PF_API int pf_map_copy(const pf_object_t* map, pf_object_t** out);

/* The value stored under key in a map (made by any runtime), borrowed (valid while the map
 * lives and is not changed), into *out. Follows the lookup rule (see packfn/function.h): an
 * absent key gives 0 with *out = NULL and raises nothing. -1 with TypeError (not a Map, a Dict
 * included: read a dict with pf_dict_get; key of an unsupported type) or ValueError (NULL key
 * or out; a broken table on the key's chain); *out is then NULL. */
PF_API int pf_map_get(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out);

/* The older name of pf_map_get, kept for existing code: same behaviour. */
PF_API int pf_map_find(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out);

/* 1 when key is in the map, 0 when not; -1 with an error raised as pf_map_get. */
PF_API int pf_map_contains(const pf_object_t* map, const pf_any_t* key);

/* Number of entries of a map (made by any runtime) into *out. -1 with TypeError (not a Map, a
 * Dict included: see pf_dict_count) or ValueError (NULL out); *out is then 0. */
PF_API int pf_map_count(const pf_object_t* map, size_t* out);

/* Iteration over a map or dict (made by any runtime) in insertion order, both forms:
 *   pf_map_iter_t it;
 *   const pf_any_t *key, *value;
 *   if (pf_map_iter_init(map, &it) != 0) return -1;
 *   while (pf_map_iter_next(&it, &key, &value) == 1) use(key, value);
 * The cursor borrows the map: keep a reference and change nothing while walking. */
typedef struct pf_map_iter_s {
  const pf_object_t* map; /* the map or dict walked (borrowed); NULL after a failed init */
  uint64_t position;      /* private: the next entry's place */
} pf_map_iter_t;

/* Starts a walk over map's entries. -1 with TypeError (not a Map or Dict) or ValueError (NULL
 * it); a failed init leaves a cursor that yields nothing. */
PF_API int pf_map_iter_init(const pf_object_t* map, pf_map_iter_t* it);

/* The next entry: 1 with *key and *value borrowed from the map (valid while it lives and is
 * not changed), 0 at the end (outputs NULL). -1 with ValueError (NULL it, key or value); the
 * outputs not NULL are then NULL. */
PF_API int pf_map_iter_next(pf_map_iter_t* it, const pf_any_t** key, const pf_any_t** value);

/* Creates an empty dict (mutable, shared). New reference in *out.
 * -1 with ValueError (NULL out) or MemoryError; *out is then NULL. */
PF_API int pf_dict_create(pf_object_t** out);

/* Sets dict[key] = value in place in any Dict (made by any runtime); key and value as
 * pf_map_set (a packfn map given as either is frozen). -1 with TypeError (not a Dict; key,
 * value or a stored key as pf_map_set), ValueError (as pf_map_set: the dict itself as key or
 * value, ...) or MemoryError; the dict is then unchanged and nothing is retained or moved. */
PF_API int pf_dict_set(pf_object_t* dict, const pf_any_t* key, const pf_any_t* value);

/* The value under key in a dict, borrowed (valid until the dict changes), into *out; absent
 * key: 0 with *out = NULL. -1 with TypeError (not a Dict; key type) or ValueError (NULL key or
 * out; a broken table); *out is then NULL. */
PF_API int pf_dict_get(const pf_object_t* dict, const pf_any_t* key, const pf_any_t** out);

/* Removes key from a dict, releasing its key and value: 1 when it was there, 0 when absent
 * (nothing raised). -1 with TypeError (not a Dict; key type) or ValueError (NULL key; a broken
 * table), the dict then unchanged. */
PF_API int pf_dict_erase(pf_object_t* dict, const pf_any_t* key);

/* Number of entries of a dict into *out. -1 with TypeError (not a Dict) or ValueError (NULL
 * out); *out is then 0. */
PF_API int pf_dict_count(const pf_object_t* dict, size_t* out);

/* ---- equality ---- */

/* Deep equality: shapes by extents, arrays element by element, maps (and dicts, each with its
 * own kind) by the same keys with equal values (in any order), recursing into nested containers;
 * every other pair as pf_any_equal (so strings by contents, other objects by identity, lists
 * included). One object is equal to itself without being walked (a container holding a NaN
 * equals itself; two distinct ones holding NaNs do not). Returns 1 or 0; never raises. Two NULL
 * pointers are equal. Ends on reference cycles (through dicts): a pair of maps met again while
 * comparing counts as equal, so two cycles of the same shape and contents are equal. Should
 * memory for remembering the pairs run out (millions of maps), it returns 0. */
PF_API int pf_container_equal(const pf_any_t* a, const pf_any_t* b);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_CONTAINER_H_ */
