/* snippet mma_16816 (templates/snippets): one tensor-core MMA, d += a * b on a 16 x 8 x 16
 * tile with fp32 accumulators (mma.sync.m16n8k16, row.col).  The template substitutes
 * ${mma_type}, the operands' PTX type ("f16" or "bf16"), with mmt.subst before it places the
 * text in its kernel.  a holds the four 32-bit registers of
 * the 16 x 16 A fragment, b the two of the 16 x 8 B fragment, d the four accumulators (PTX
 * ISA, "Matrix Fragments for mma.m16n8k16"). */
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${mma_type}.${mma_type}.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
