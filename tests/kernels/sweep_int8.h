/* The sweep's checker for the int8 GEMM of the quantized ONNX operators
 * (kernels/kf_int8.h), included by test_sweep.c after its helpers; SWEEP_INT8_CHECKERS
 * lists it for the checker table.
 *
 * Tolerance: bit for bit (the sums are exact integers; the reference defines their
 * wrap-around modulo 2^32). Shapes: odd M, N and K around the tiles (8 and 4 rows, 16-
 * and 32-column panels, 4-deep k-groups), C with a row stride wider than N whose gap must
 * stay untouched, the extreme bytes (A = 255 against B = ±127/−128, where a plain
 * vpmaddubsw would saturate), and one K large enough for the int32 sums to wrap. The
 * reference itself is checked against products of the unpacked B (packing included). */
#ifndef AK_TESTS_KERNELS_SWEEP_INT8_H
#define AK_TESTS_KERNELS_SWEEP_INT8_H

/* fill: 0 random, 1 extremes (A 255, B alternating 127 / −128) */
static void check_u8s8_gemm_at(const sweep_case *c, size_t M, size_t N, size_t K, int fill,
                               uint64_t *seed) {
    size_t lda = K + 3, ldc = N + 5;
    uint8_t *A = xmalloc(M * lda), *B = xmalloc(K * N);
    for (size_t i = 0; i < M * lda; i++) A[i] = fill ? 255 : (uint8_t)test_rand_u64(seed);
    for (size_t i = 0; i < K * N; i++) B[i] = fill ? (i % 3 ? 0x80 : 0x7f) : (uint8_t)test_rand_u64(seed);
    int8_t *Bp = xmalloc(ak__i8_packed_bytes(K, N));
    int32_t *colsum = xmalloc(N * 4);
    ak__i8_pack_b(B, 0, K, N, N, 1, Bp, colsum);
    int32_t *want = xmalloc(M * ldc * 4);
    memset(want, 0x5a, M * ldc * 4);
    guarded_buf g = out_alloc(M * ldc * 4, 4);
    memcpy(g.data, want, M * ldc * 4);
    KERNEL(c, c->ref, ak__kf_u8s8_gemm)(M, N, K, A, lda, Bp, want, ldc);
    KERNEL(c, c->k, ak__kf_u8s8_gemm)(M, N, K, A, lda, Bp, g.data, ldc);
    const int32_t *got = g.data;
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < ldc; n++) {
            size_t at = m * ldc + n;
            if (n < N && m < 2) { /* the reference against the unpacked product */
                uint32_t s = 0, cs = 0;
                for (size_t k = 0; k < K; k++) {
                    s += (uint32_t)((int32_t)A[m * lda + k] * (int8_t)B[k * N + n]);
                    cs += (uint32_t)(int8_t)B[k * N + n];
                }
                if ((int32_t)s != want[at] || (int32_t)cs != colsum[n])
                    fail_msg("%s: M=%zu N=%zu K=%zu [%zu][%zu]: reference %d, unpacked product "
                             "%d (column sum %d, %d)", c->info->ref, M, N, K, m, n, want[at],
                             (int32_t)s, colsum[n], (int32_t)cs);
            }
            if (got[at] != want[at])
                fail_msg("%s %s (%s) M=%zu N=%zu K=%zu fill=%d [%zu][%zu]%s: %d, reference %d",
                         c->k->name, c->info->name, c->k->impl[c->index], M, N, K, fill, m, n,
                         n >= N ? " (outside N)" : "", got[at], want[at]);
        }
    if (!guarded_intact(&g))
        fail_msg("%s %s M=%zu N=%zu K=%zu: wrote outside C", c->k->name, c->info->name, M, N, K);
    guarded_free(&g);
    free(A), free(B), free(Bp), free(colsum), free(want);
}

static void check_u8s8_gemm(const sweep_case *c) {
    static const size_t Ms[] = {1, 3, 4, 5, 8, 9, 17};
    static const size_t Ns[] = {1, 7, 15, 16, 17, 32, 33, 47, 65};
    static const size_t Ks[] = {1, 3, 4, 5, 8, 31, 64, 129};
    uint64_t seed = 0x1865;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
            for (size_t l = 0; l < sizeof Ks / sizeof *Ks; l++)
                check_u8s8_gemm_at(c, Ms[i], Ns[j], Ks[l], 0, &seed);
    check_u8s8_gemm_at(c, 9, 33, 257, 1, &seed);
    /* 70001·255·128 > 2^31: every variant wraps like the reference */
    check_u8s8_gemm_at(c, 2, 17, 70001, 1, &seed);
}


/* ---- the channel-major product with the fused epilogue (ak__kf_u8s8_conv) --------------
 * Bit for bit against the reference, every output kind: int32 with the pixel zero-point
 * term, uint8 with relu and int8; multipliers that make exact ties (0.5, 0.25: half-to-
 * even decides), random ones, one that saturates both ways, and NaN (the low bound).
 * Shapes around the tile (6 channels × 64 pixels, 16-pixel vectors, 4-deep k-groups), out
 * rows wider than P whose gap must stay untouched, and the padding pixels of the packed X
 * filled with noise (they must not reach the output). */
static void check_u8s8_conv_at(const sweep_case *c, size_t M, size_t P, size_t K, int kind,
                               float mult_kind, uint64_t *seed) {
    size_t ldw = ak__i8_w_stride(K), ldx = ak__i8_x_stride(P), k4 = ldw / AK_KF_I8_KG;
    size_t ldo = P + 3, es = kind == AK_I8_OUT_I32 ? 4 : 1;
    int8_t *W = xmalloc(M * ldw);
    uint8_t *X = xmalloc(k4 * ldx);
    int32_t *bias = xmalloc(M * 4), *rzp = xmalloc(M * 4), *csum = xmalloc((P + 1) * 4);
    float *mult = xmalloc(M * 4);
    for (size_t i = 0; i < M * ldw; i++)
        W[i] = i % ldw < K ? (int8_t)test_rand_u64(seed) : 0;
    for (size_t i = 0; i < k4 * ldx; i++) X[i] = (uint8_t)test_rand_u64(seed);
    for (size_t m = 0; m < M; m++) {
        bias[m] = (int32_t)(test_rand_u64(seed) % 20001) - 10000;
        rzp[m] = (int32_t)(test_rand_u64(seed) % 256) - 128;
        /* 0: random, 1: ties (even accumulators land on .5 with 0.25), 2: saturating, 3: NaN */
        mult[m] = mult_kind == 0 ? 0.0005f + (float)(test_rand_u64(seed) % 1000) * 1e-5f
                  : mult_kind == 1 ? (m % 2 ? 0.5f : 0.25f)
                  : mult_kind == 2 ? (m % 2 ? 1.0f : -1.0f)
                                   : __builtin_nanf("");
    }
    for (size_t p = 0; p < P; p++) csum[p] = (int32_t)(test_rand_u64(seed) % 2000);
    ak__i8_epilogue e = {kind, bias, kind == AK_I8_OUT_I32 || M % 2 ? rzp : NULL, csum, mult,
                         kind == AK_I8_OUT_S8 ? -3 : 120, kind == AK_I8_OUT_U8, NULL, ldo};
    size_t bytes = M * ldo * es;
    uint8_t *want = xmalloc(bytes);
    memset(want, 0x5a, bytes);
    guarded_buf g = out_alloc(bytes, es);
    memcpy(g.data, want, bytes);
    e.out = want;
    KERNEL(c, c->ref, ak__kf_u8s8_conv)(M, P, K, W, X, &e);
    e.out = g.data;
    KERNEL(c, c->k, ak__kf_u8s8_conv)(M, P, K, W, X, &e);
    if (memcmp(g.data, want, bytes)) {
        size_t i = 0;
        while (((uint8_t *)g.data)[i] == want[i]) i++;
        size_t m = i / es / ldo, p = i / es % ldo;
        fail_msg("%s %s (%s) M=%zu P=%zu K=%zu kind=%d mult=%g: [%zu][%zu]%s differs from the "
                 "reference", c->k->name, c->info->name, c->k->impl[c->index], M, P, K, kind,
                 (double)mult_kind, m, p, p >= P ? " (outside P)" : "");
    }
    if (!guarded_intact(&g))
        fail_msg("%s %s M=%zu P=%zu K=%zu: wrote outside out", c->k->name, c->info->name, M, P, K);
    guarded_free(&g);
    free(W), free(X), free(bias), free(rzp), free(csum), free(mult), free(want);
}

static void check_u8s8_conv(const sweep_case *c) {
    static const size_t Ms[] = {1, 5, 6, 7, 13};
    static const size_t Ps[] = {1, 15, 16, 17, 63, 64, 65, 130};
    static const size_t Ks[] = {1, 3, 4, 9, 27, 64};
    uint64_t seed = 0xc0de;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ps / sizeof *Ps; j++)
            for (size_t l = 0; l < sizeof Ks / sizeof *Ks; l++)
                check_u8s8_conv_at(c, Ms[i], Ps[j], Ks[l], (int)((i + j + l) % 3),
                                   (float)((i + l) % 2), &seed);
    for (int kind = AK_I8_OUT_U8; kind <= AK_I8_OUT_S8; kind++)
        for (int mk = 1; mk <= 3; mk++) check_u8s8_conv_at(c, 7, 33, 20, kind, (float)mk, &seed);
    /* 70001·255·128 > 2^31: the sums wrap like the reference's */
    check_u8s8_conv_at(c, 2, 17, 70001, AK_I8_OUT_I32, 0, &seed);
}

#define SWEEP_INT8_CHECKERS {"u8s8_gemm", check_u8s8_gemm}, {"u8s8_conv", check_u8s8_conv},

#endif /* AK_TESTS_KERNELS_SWEEP_INT8_H */
