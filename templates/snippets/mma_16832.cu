/* snippet mma_16832 (templates/snippets): one FP8 tensor-core MMA, d = a * b + d on a
 * 16 x 8 x 32 tile with fp32 accumulators (mma.sync.m16n8k32, row.col, sm_89 and newer).
 * The template substitutes ${a_type} and ${b_type}, each "e4m3" or "e5m2", with mmt.subst
 * before it places the text in its kernel.  a holds the four 32-bit registers of the 16 x 32
 * A fragment, b the two of the 32 x 8 B fragment (four FP8 elements a register: the same 8
 * bytes of K a lane and row as m16n8k16's 16-bit fragments), d the four accumulators (PTX ISA,
 * "Matrix Fragments for mma.m16n8k32"). */
__device__ __forceinline__ void mma_16832(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.${a_type}.${b_type}.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
