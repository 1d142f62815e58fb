/* packfn containers: shapes (69), immutable arrays of values (71) and hash maps (72) keyed by
 * strings, bytes, ints and objects, with their C API to build, read, iterate and compare. */
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
 * Storing a map into an array or a map freezes it, so containers stored in containers never
 * change again: nested containers are safe to share between threads and can never form a
 * reference cycle. */

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
 * pointer, a count whose size overflows) or MemoryError; nothing is retained or moved then
 * (an object rvalue reference among the items keeps its object) and *out is NULL. */
PF_API int pf_array_create(const pf_any_t* items, size_t count, pf_object_t** out);

/* Creates an array that takes the owned values items[0..count) as they are (no retain): on
 * success each items[i] is left none. For results of calls and of *_create. Views (raw
 * strings, byte-array and DLTensor pointers, rvalue references) are refused with TypeError
 * naming the item. Failure as pf_array_create; the items are then untouched (still yours). */
PF_API int pf_array_create_take(pf_any_t* items, size_t count, pf_object_t** out);

/* Number of values of an array (made by any runtime following the ABI) into *out.
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

/* ---- map (type 72): a hash map from keys to values, iterated in insertion order ----
 * Keys are strings (raw, small or object: equal contents are the same key whatever the form),
 * bytes (likewise), ints, or objects (the same object, by identity). Other key types (bool,
 * float, none, pointers...) are refused with TypeError. Values are any value with an owned
 * form. Build a map with pf_map_create and pf_map_set; it is then frozen explicitly
 * (pf_map_freeze) or by being stored in a container. A map is not thread-safe while being
 * built; a frozen one is. Only maps made by packfn are accepted by these functions. */

/* One entry of a map: both values owned by the map. */
typedef struct pf_map_item_s {
  pf_any_t key;   /* as stored: raw strings were made small or object strings */
  pf_any_t value; /* owned by the map */
} pf_map_item_t;

/* Creates an empty map, open for pf_map_set. New reference in *out.
 * -1 with ValueError (NULL out) or MemoryError. */
PF_API int pf_map_create(pf_object_t** out);

/* Sets map[key] = value; both are views, copied to owned values. A new key goes last in the
 * iteration order; an existing key keeps its place and its stored key, and the old value is
 * released. A map given as the value or the key is frozen.
 * -1 with TypeError (map not a packfn Map or frozen; key of an unsupported type; value without
 * an owned form), ValueError (NULL key or value; the map itself as key or value) or
 * MemoryError; the map is then unchanged and nothing is retained or moved. */
PF_API int pf_map_set(pf_object_t* map, const pf_any_t* key, const pf_any_t* value);

/* Freezes a map: later pf_map_set calls fail with TypeError. Freezing twice is fine.
 * -1 with TypeError when map is not a packfn Map. */
PF_API int pf_map_freeze(pf_object_t* map);

/* 1 when the map is frozen, 0 when it is still open or `map` is not a packfn Map. */
PF_API int pf_map_is_frozen(const pf_object_t* map);

/* The value stored under key, borrowed, into *out. Follows the lookup rule (see
 * packfn/function.h): an absent key gives 0 with *out = NULL and raises nothing. -1 with
 * TypeError (not a packfn Map; key of an unsupported type) or ValueError (NULL key or out);
 * *out is then NULL. */
PF_API int pf_map_get(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out);

/* The older name of pf_map_get, kept for existing code: same behaviour. */
PF_API int pf_map_find(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out);

/* 1 when key is in the map, 0 when not; -1 with an error raised as pf_map_find. */
PF_API int pf_map_contains(const pf_object_t* map, const pf_any_t* key);

/* Number of entries into *out. -1 with TypeError (not a packfn Map) or ValueError (NULL out);
 * *out is then 0. */
PF_API int pf_map_count(const pf_object_t* map, size_t* out);

/* All entries in insertion order for iteration: *items points at *count consecutive entries,
 * borrowed while the map lives and stays unchanged (non-NULL even when empty).
 * -1 with TypeError (not a packfn Map) or ValueError (NULL outputs); outputs then NULL and 0. */
PF_API int pf_map_items(const pf_object_t* map, const pf_map_item_t** items, size_t* count);

/* ---- equality ---- */

/* Deep equality: shapes by extents, arrays element by element, maps by the same keys with
 * equal values (in any order), recursing into nested containers; every other pair as
 * pf_any_equal (so strings by contents, other objects by identity). Returns 1 or 0; never
 * raises. Two NULL pointers are equal. */
PF_API int pf_container_equal(const pf_any_t* a, const pf_any_t* b);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_CONTAINER_H_ */
