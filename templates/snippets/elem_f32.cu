/* snippet elem_f32 (templates/snippets): f32 (and tf32 data) under the names elem_f16 and
 * elem_bf16 give 16-bit types, so that one kernel body serves every dtype: elem_t is float,
 * to_elem and to_float are the identity. */
typedef float elem_t;
__device__ __forceinline__ elem_t to_elem(float x) { return x; }
__device__ __forceinline__ float to_float(elem_t x) { return x; }
