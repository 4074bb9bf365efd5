// Scale searches shared by the legacy and non-linear 4-bit quantizers. They follow llama.cpp's
// make_qx_quants / make_qkx3_quants / best_index_int8 step for step (same float operation
// order) so that our files match the reference's byte for byte where the inputs agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace legacy_search {

// Round half to even via the 1.5 * 2^23 trick (|v| < 2^22).
inline int nearest_int(float v) {
    const float t = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric levels -nmax .. nmax-1 with weights w: start from the scale that maps the signed
// absmax to -nmax, then try 18 nearby inverse scales, keeping the one with the largest
// (sum w x l)^2 / (sum w l^2). L gets the levels plus nmax. Returns the scale.
inline float make_qx_quants(int n, int nmax, const float * x, int8_t * L, const float * w) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t) (l + nmax);
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += w[i] * x[i] * l;
            suml2 += w[i] * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) L[i] = (int8_t) (nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Asymmetric levels 0 .. nmax with a min <= 0, weighted least squares over nstep+1 candidate
// inverse scales (rmin + rdelta * is + nmax) / (max - min). Returns the scale, *the_min = -min.
inline float make_qkx3_quants(int n, int nmax, const float * x, const float * w, uint8_t * L, float * the_min,
                              uint8_t * Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        std::memset(L, 0, n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t) clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_err += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t) l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; ++i) {
                const float diff = this_scale * Laux[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best_err) {
                std::memcpy(L, Laux, n);
                best_err = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// Second pass over the integer sub-block scales of a super-block, once the super-block scale d
// is fixed: the rounding of a sub-block's fitted scale onto d's grid (s) need not be the integer
// with the least error once the values are rounded again with it, and the first fit weighted
// its values by x^2, not by the error measure. Tries s - radius .. s + radius (within
// [smin, smax]) and returns the one whose re-rounded values have the least squared error,
// weighted by the importance w (nullptr: the plain error). value(step, x) is the value x
// becomes with sub-block step d * s (0 for a zero step).
template <typename Value>
int refine_sub_scale(int s, int smin, int smax, int radius, float d, const float * x, const float * w, int n, Value value) {
    int best_s = s;
    float best_err = INFINITY;
    for (int c = s - radius > smin ? s - radius : smin; c <= (s + radius < smax ? s + radius : smax); ++c) {
        const float step = d * c;
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = x[i] - value(step, x[i]);
            err += (w ? w[i] : 1.0f) * diff * diff;
        }
        if (err < best_err) {
            best_err = err;
            best_s = c;
        }
    }
    return best_s;
}

// Index of the table value nearest to x (table sorted ascending; ties go up).
inline int best_index_int8(int n, const int8_t * val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < val[mid]) hi = mid; else lo = mid;
    }
    return x - val[hi - 1] < val[hi] - x ? hi - 1 : hi;
}

} // namespace legacy_search
