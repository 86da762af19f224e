/* The body of the 256-bit int8 GEMM drivers (kernels/x86/i8gemm_avx2.c), instantiated
 * twice: with AVX2's exact vpmaddubsw split and with AVX-VNNI's vpdpbusd. The includer
 * defines I8_TARGET (a function attribute), I8_NAME (the kernel's symbol) and
 * I8_DOT(acc, a_lo, a_hi, a, b), the step acc += Σ of 4 products per int32 lane.
 * Tiles of up to 4 rows × one panel (16 columns, two vectors): 8 accumulators. */
#define I8_ROWS 4

static inline __attribute__((always_inline)) I8_TARGET void
I8_TILE(int mr, size_t ncols, size_t K, size_t k4, const uint8_t *A, size_t lda,
        const int8_t *Bp0, int32_t *C, size_t ldc) {
    __m256i acc[I8_ROWS][2];
    for (int r = 0; r < I8_ROWS; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1), c128 = _mm256_set1_epi16(128);
    (void)ones, (void)c128;
    size_t full = K / AK_KF_I8_KG;
    for (size_t g = 0; g < k4; g++) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(Bp0 + g * 64));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(Bp0 + g * 64 + 32));
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            int32_t w;
            if (g < full) memcpy(&w, A + r * lda + g * AK_KF_I8_KG, 4);
            else w = ak__i8_a_word(A + r * lda, g, K);
            uint32_t uw = (uint32_t)w;
            __m256i a = _mm256_set1_epi32(w);
            /* the low 7 bits and the top bit of each activation byte */
            __m256i a_lo = _mm256_set1_epi32((int32_t)(uw & 0x7f7f7f7fu));
            __m256i a_hi = _mm256_set1_epi32((int32_t)((uw >> 7) & 0x01010101u));
            (void)a, (void)a_lo, (void)a_hi;
            I8_DOT(acc[r][0], a_lo, a_hi, a, b0);
            I8_DOT(acc[r][1], a_lo, a_hi, a, b1);
        }
    }
    for (int r = 0; r < mr; r++) {
        int32_t *c = C + r * ldc;
        if (ncols >= 16) {
            _mm256_storeu_si256((__m256i *)c, acc[r][0]);
            _mm256_storeu_si256((__m256i *)(c + 8), acc[r][1]);
        } else {
            int32_t tmp[16];
            _mm256_storeu_si256((__m256i *)tmp, acc[r][0]);
            _mm256_storeu_si256((__m256i *)(tmp + 8), acc[r][1]);
            memcpy(c, tmp, ncols * sizeof *c);
        }
    }
}

I8_TARGET void I8_NAME(size_t M, size_t N, size_t K, const uint8_t *A, size_t lda,
                       const int8_t *Bp, int32_t *C, size_t ldc) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    size_t panels = (N + AK_KF_I8_NR - 1) / AK_KF_I8_NR;
    size_t panel_bytes = k4 * AK_KF_I8_NR * AK_KF_I8_KG, chunk = ak__i8_chunk_panels(K);
    for (size_t p0 = 0; p0 < panels; p0 += chunk) {
        size_t p1 = p0 + chunk < panels ? p0 + chunk : panels;
        for (size_t m = 0; m < M; m += I8_ROWS) {
            int mr = (int)(M - m < I8_ROWS ? M - m : I8_ROWS);
            for (size_t p = p0; p < p1; p++) {
                size_t n0 = p * AK_KF_I8_NR, ncols = N - n0 < 16 ? N - n0 : 16;
                const uint8_t *a = A + m * lda;
                const int8_t *b = Bp + p * panel_bytes;
                int32_t *c = C + m * ldc + n0;
                switch (mr) { /* constant row counts: the accumulators stay in registers */
                case 4: I8_TILE(4, ncols, K, k4, a, lda, b, c, ldc); break;
                case 3: I8_TILE(3, ncols, K, k4, a, lda, b, c, ldc); break;
                case 2: I8_TILE(2, ncols, K, k4, a, lda, b, c, ldc); break;
                default: I8_TILE(1, ncols, K, k4, a, lda, b, c, ldc); break;
                }
            }
        }
    }
}

#undef I8_ROWS
