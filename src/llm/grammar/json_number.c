/* JSON Schema numeric ranges → GBNF: integers and decimals between minimum/maximum
 * (exclusive forms too), digit by digit.
 *
 * An integer range is split by digit count, and each same-length range [a, b] becomes a
 * prefix tree of digit classes (digits_range). A decimal range is the union, for k = 0..6
 * fraction digits, of the integers M in [⌈lo·10^k⌉, ⌊hi·10^k⌋] written with a point k
 * digits from the right — so 0.25 ≤ x ≤ 1.5 admits 1, 0.3, 1.5, 0.25, 0.250 … but not 0.2
 * or 1.51. The bounds are taken as the decimals the schema wrote (the shortest text that
 * reads back as the parsed double), not as binary fractions, so 0.7 means 7/10. No
 * exponent forms are generated; at most 16 significant digits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/grammar/json_number.h"

#define INT_LIMIT 9999999999999999LL /* 16 digits */

/* Same-length decimal strings a <= b (digits only): an expression for [a, b]. */
static void digits_range(sbuf *o, const char *a, const char *b, size_t n) {
    if (n == 0) return;
    size_t k = 0;
    while (k < n && a[k] == '0' && b[k] == '9') ++k;
    if (k == n) { /* every n-digit string: no recursion (it would double at each digit) */
        sb_printf(o, "[0-9]{%zu}", n);
        return;
    }
    if (n == 1) {
        if (a[0] == b[0]) sb_printf(o, "\"%c\"", a[0]);
        else sb_printf(o, "[%c-%c]", a[0], b[0]);
        return;
    }
    if (a[0] == b[0]) {
        sb_printf(o, "\"%c\" ", a[0]);
        digits_range(o, a + 1, b + 1, n - 1);
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', n - 1), memset(zeros, '0', n - 1);
    sb_puts(o, "(");
    /* a0 followed by [a[1:], 99..9] */
    sb_printf(o, "\"%c\" ", a[0]);
    digits_range(o, a + 1, nines, n - 1);
    if (b[0] - a[0] > 1) {
        if (b[0] - a[0] == 2) sb_printf(o, " | \"%c\"", a[0] + 1);
        else sb_printf(o, " | [%c-%c]", a[0] + 1, b[0] - 1);
        sb_printf(o, " [0-9]{%zu}", n - 1);
    }
    sb_printf(o, " | \"%c\" ", b[0]);
    digits_range(o, zeros, b + 1, n - 1);
    sb_puts(o, ")");
}

/* Non-negative [lo, hi] as alternatives (appends " | " between them; *first tracks it). */
static void nonneg_range(sbuf *o, long long lo, long long hi, int *first) {
    long long pow10 = 1;
    for (int len = 1; len <= 17 && lo <= hi; ++len, pow10 *= 10) {
        long long len_lo = len == 1 ? 0 : pow10, len_hi = pow10 * 10 - 1;
        long long a = lo > len_lo ? lo : len_lo, b = hi < len_hi ? hi : len_hi;
        if (a > b) continue;
        char sa[24], sb_[24];
        snprintf(sa, sizeof sa, "%lld", a), snprintf(sb_, sizeof sb_, "%lld", b);
        if (!*first) sb_puts(o, " | ");
        *first = 0;
        digits_range(o, sa, sb_, strlen(sa));
    }
}

/* Integers in [lo, hi] (clamped to 16 digits). 0 when the range is empty. */
static int int_range(sbuf *o, long long lo, long long hi) {
    if (lo < -INT_LIMIT) lo = -INT_LIMIT;
    if (hi > INT_LIMIT) hi = INT_LIMIT;
    if (lo > hi) return 0;
    int first = 1;
    sb_puts(o, "(");
    if (lo < 0) { /* "-" then [max(1, -hi), -lo] */
        long long nlo = hi < 0 ? -hi : 1, nhi = -lo;
        sb_puts(o, "\"-\" (");
        int f2 = 1;
        nonneg_range(o, nlo, nhi, &f2);
        sb_puts(o, ")");
        first = 0;
    }
    if (hi >= 0) nonneg_range(o, lo > 0 ? lo : 0, hi, &first);
    sb_puts(o, ")");
    return 1;
}

/* The bounds of an integer schema (as integers); *has = 0 when it has none. */
static ak_status integer_bounds(const cJSON *s, long long *lo, long long *hi, int *has) {
    *lo = -INT_LIMIT, *hi = INT_LIMIT, *has = 0;
    static const char *const names[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; ++k) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, names[k]);
        if (!v) continue;
        if (!cJSON_IsNumber(v))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: '%s' must be a number", names[k]);
        double d = v->valuedouble;
        if (!(fabs(d) < 1e16))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: '%s' beyond 16 digits", names[k]);
        long long b;
        if (k < 2) { /* lower bound: the smallest integer satisfying it */
            b = (long long)ceil(d);
            if (k == 1 && (double)b == d) b++;
            if (b > *lo) *lo = b;
        } else {
            b = (long long)floor(d);
            if (k == 3 && (double)b == d) b--;
            if (b < *hi) *hi = b;
        }
        *has = 1;
    }
    return AK_OK;
}

/* ---- decimals ---------------------------------------------------------------------------- */

#define MAX_FRACTION 6
/* A one-sided range stops here: 12 integer digits leave room for the 6 fraction digits. */
#define DECIMAL_LIMIT 999999999999.0

/* |d| as plain decimal digits: *digits (no point, no sign) with the point after
 * *int_len of them (int_len may be <= 0 or beyond the digits: zeros implied). */
static void decimal_digits(double d, char *digits, size_t cap, int *int_len) {
    char text[40];
    for (int p = 1; p <= 17; ++p) { /* the shortest text that reads back as d */
        snprintf(text, sizeof text, "%.*e", p - 1, fabs(d));
        if (strtod(text, NULL) == fabs(d)) break;
    }
    size_t n = 0;
    const char *e = strchr(text, 'e');
    for (const char *c = text; c < e && n + 1 < cap; ++c)
        if (*c >= '0' && *c <= '9') digits[n++] = *c;
    digits[n] = 0;
    *int_len = 1 + atoi(e + 1); /* d.ddd e X: one digit before the point, moved by X */
}

/* M = |d|·10^k rounded down (up when round_up), *exact = nothing was rounded away. */
static long long scaled(double d, int k, int round_up, int *exact) {
    char digits[40];
    int int_len;
    decimal_digits(d, digits, sizeof digits, &int_len);
    long long m = 0;
    int keep = int_len + k, n = (int)strlen(digits);
    for (int i = 0; i < keep; ++i) m = m * 10 + (i < n ? digits[i] - '0' : 0);
    *exact = 1;
    for (int i = keep < 0 ? 0 : keep; i < n; ++i)
        if (digits[i] != '0') *exact = 0;
    if (keep < 0 && d != 0) *exact = 0; /* all digits below 10^-k */
    if (!*exact && round_up) m++;
    return m;
}

typedef struct bound {
    double v;
    int exclusive, present;
} bound;

static long long pow10ll(int k) {
    long long p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* v (< 10^k) as exactly k digits, zero-padded. */
static void pad_digits(char *out, long long v, int k) {
    for (int i = k - 1; i >= 0; --i, v /= 10) out[i] = (char)('0' + v % 10);
    out[k] = 0;
}

/* Numbers with exactly k fraction digits whose scaled values M lie in [mlo, mhi]. */
static void fixed_point_range(sbuf *o, long long mlo, long long mhi, int k, int *first) {
    if (k == 0) {
        nonneg_range(o, mlo, mhi, first);
        return;
    }
    long long p = pow10ll(k), qlo = mlo / p, qhi = mhi / p;
    char rlo[24], rhi[24], nines[24], zeros[24];
    pad_digits(rlo, mlo % p, k), pad_digits(rhi, mhi % p, k);
    memset(nines, '9', (size_t)k), memset(zeros, '0', (size_t)k);
    nines[k] = zeros[k] = 0;
    struct {
        long long q0, q1;
        const char *r0, *r1;
    } parts[3] = {{qlo, qlo, rlo, qhi == qlo ? rhi : nines},
                  {qlo + 1, qhi - 1, zeros, nines},
                  {qhi, qhi, zeros, rhi}};
    int n_parts = qhi == qlo ? 1 : 3;
    for (int i = 0; i < n_parts; ++i) {
        if (parts[i].q0 > parts[i].q1) continue;
        if (!*first) sb_puts(o, " | ");
        *first = 0;
        int f = 1;
        sb_puts(o, "(");
        nonneg_range(o, parts[i].q0, parts[i].q1, &f);
        sb_puts(o, ") \".\" ");
        digits_range(o, parts[i].r0, parts[i].r1, (size_t)k);
    }
}

/* Magnitudes in [lo, hi] (both >= 0) with up to `fraction` digits after the point. */
static void magnitude_range(sbuf *o, bound lo, bound hi, int fraction, int *first) {
    for (int k = 0; k <= fraction; ++k) {
        int exact;
        long long mlo = scaled(lo.v, k, 1, &exact);
        if (exact && lo.exclusive) mlo++;
        long long mhi = scaled(hi.v, k, 0, &exact);
        if (exact && hi.exclusive) mhi--;
        if (mlo <= mhi) fixed_point_range(o, mlo, mhi, k, first);
    }
}

static ak_status read_bound(const cJSON *s, const char *inclusive, const char *exclusive, double unbounded, bound *b) {
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(s, inclusive);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, exclusive);
    *b = (bound){unbounded, 0, 0};
    for (int which = 0; which < 2; ++which) {
        const cJSON *v = which ? x : i;
        if (!v) continue;
        const char *name = which ? exclusive : inclusive;
        if (!cJSON_IsNumber(v)) return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: '%s' must be a number", name);
        if (!(fabs(v->valuedouble) < 1e16))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: '%s' beyond 16 digits", name);
        /* both given: the tighter one (a lower bound wants the larger value) */
        int tighter = !b->present || (unbounded < 0 ? v->valuedouble > b->v : v->valuedouble < b->v) ||
                      (v->valuedouble == b->v && which);
        if (tighter) *b = (bound){v->valuedouble, which, 1};
    }
    return AK_OK;
}

/* Fraction digits that keep |v|·10^k within a long long (18 digits). */
static int fraction_digits(double magnitude) {
    int int_digits = magnitude < 1 ? 1 : (int)floor(log10(magnitude)) + 1;
    int k = 18 - int_digits;
    return k < 0 ? 0 : k > MAX_FRACTION ? MAX_FRACTION : k;
}

static ak_status decimal_range(const cJSON *s, sbuf *o, int *bounded) {
    bound lo, hi;
    AK_CHECK(read_bound(s, "minimum", "exclusiveMinimum", -DECIMAL_LIMIT, &lo));
    AK_CHECK(read_bound(s, "maximum", "exclusiveMaximum", DECIMAL_LIMIT, &hi));
    *bounded = lo.present || hi.present;
    if (!*bounded) return AK_OK;
    int fraction = fraction_digits(fmax(fabs(lo.v), fabs(hi.v)));
    int first = 1;
    sb_puts(o, "(");
    if (lo.v < 0) { /* "-" and a magnitude in (max(0, -hi), -lo]; -0 is left to the other side */
        bound mlo = hi.v < 0 ? (bound){-hi.v, hi.exclusive, 1} : (bound){0, 1, 1};
        bound mhi = {-lo.v, lo.exclusive, 1};
        sbuf neg = {0};
        int f = 1;
        magnitude_range(&neg, mlo, mhi, fraction, &f);
        if (neg.oom) o->oom = 1;
        if (!f) sb_printf(o, "\"-\" (%s)", neg.v), first = 0;
        free(neg.v);
    }
    if (hi.v >= 0) {
        bound plo = lo.v >= 0 ? lo : (bound){0, 0, 1};
        magnitude_range(o, plo, hi, fraction, &first);
    }
    sb_puts(o, ")");
    if (first) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: empty number range");
    return AK_OK;
}

ak_status ak__json_number_range(const cJSON *s, int integer, sbuf *o, int *bounded) {
    if (!integer) return decimal_range(s, o, bounded);
    long long lo, hi;
    AK_CHECK(integer_bounds(s, &lo, &hi, bounded));
    if (*bounded && !int_range(o, lo, hi)) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: empty number range");
    return AK_OK;
}
