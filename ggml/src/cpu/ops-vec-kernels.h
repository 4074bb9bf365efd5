// The op kernels' vector primitives that every SIMD level writes the same way (ops-common.h):
// element-wise maps, activations, sums, softmax's exp-sum, and the one-row attention dot/axpy
// forms. Written once over an ISA description; included only by avx2/, avx512/ and
// neon/ops-vec.cpp, each of which compiles its own copy (internal linkage) with its flags.
// An ISA struct I provides:
//   vf, W (float lanes), kAcc (independent accumulators a reduction keeps to hide FMA latency);
//   mask and tail(rem) (the first rem <= W lanes), loadm (other lanes read as 0, nothing past them
//   is read), storem (only those lanes written), keep (other lanes set to 0);
//   zero, set1, load, store, add, sub, mul, div, max, fma(a, b, c) = a * b + c, exp, hsum.
// Tails go through the masked forms, so every element takes the same arithmetic as the body.
// What differs by ISA (blocked attention forms, conversions, rope) stays in the ISA files.
#pragma once

#include "ops-common.h"

#include <algorithm>
#include <cmath>

namespace {

template <typename I, typename Op>
inline void vec_map1(int64_t n, float * y, const float * x, Op op) {
    int64_t i = 0;
    for (; i + I::W <= n; i += I::W) I::store(y + i, op(I::load(x + i)));
    if (i < n) {
        const auto m = I::tail(n - i);
        I::storem(y + i, m, op(I::loadm(x + i, m)));
    }
}

template <typename I, typename Op>
inline void vec_map2(int64_t n, float * z, const float * x, const float * y, Op op) {
    int64_t i = 0;
    for (; i + I::W <= n; i += I::W) I::store(z + i, op(I::load(x + i), I::load(y + i)));
    if (i < n) {
        const auto m = I::tail(n - i);
        I::storem(z + i, m, op(I::loadm(x + i, m), I::loadm(y + i, m)));
    }
}

template <typename I> inline typename I::vf vec_silu(typename I::vf x) {
    return I::div(x, I::add(I::set1(1.0f), I::exp(I::sub(I::zero(), x))));
}

// x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3): the tanh form of GELU, as the reference
template <typename I> inline typename I::vf vec_gelu(typename I::vf x) {
    const typename I::vf x2 = I::mul(x, x);
    const typename I::vf u = I::mul(I::mul(I::set1(-2.0f * 0.7978845608028654f), x), I::fma(I::set1(0.044715f), x2, I::set1(1.0f)));
    return I::div(x, I::add(I::set1(1.0f), I::exp(u)));
}

template <typename I> struct vec_kernels {
    using vf = typename I::vf;

    static void add(int64_t n, float * z, const float * x, const float * y) { vec_map2<I>(n, z, x, y, [](vf a, vf b) { return I::add(a, b); }); }
    static void sub(int64_t n, float * z, const float * x, const float * y) { vec_map2<I>(n, z, x, y, [](vf a, vf b) { return I::sub(a, b); }); }
    static void mul(int64_t n, float * z, const float * x, const float * y) { vec_map2<I>(n, z, x, y, [](vf a, vf b) { return I::mul(a, b); }); }
    // lanes past the tail divide 0 by 0; they are never stored
    static void div(int64_t n, float * z, const float * x, const float * y) { vec_map2<I>(n, z, x, y, [](vf a, vf b) { return I::div(a, b); }); }

    static void scale_bias(int64_t n, float * y, const float * x, float s, float b) {
        const vf vs = I::set1(s), vb = I::set1(b);
        vec_map1<I>(n, y, x, [&](vf a) { return I::fma(a, vs, vb); });
    }
    static void silu(int64_t n, float * y, const float * x) { vec_map1<I>(n, y, x, vec_silu<I>); }
    static void gelu(int64_t n, float * y, const float * x) { vec_map1<I>(n, y, x, vec_gelu<I>); }
    static void swiglu(int64_t n, float * z, const float * g, const float * u) {
        vec_map2<I>(n, z, g, u, [](vf a, vf b) { return I::mul(vec_silu<I>(a), b); });
    }

    // kAcc accumulators over kAcc vectors per step; zero tail lanes add nothing to a sum of terms
    template <typename Term>
    static float reduce_sum(int64_t n, const float * x, const float * y, Term term) {
        constexpr int A = I::kAcc;
        vf s[A];
        for (int j = 0; j < A; ++j) s[j] = I::zero();
        int64_t i = 0;
        for (; i + A * I::W <= n; i += A * I::W) {
            for (int j = 0; j < A; ++j) s[j] = term(s[j], I::load(x + i + j * I::W), y ? I::load(y + i + j * I::W) : I::zero());
        }
        for (; i + I::W <= n; i += I::W) s[0] = term(s[0], I::load(x + i), y ? I::load(y + i) : I::zero());
        if (i < n) {
            const auto m = I::tail(n - i);
            s[1] = term(s[1], I::loadm(x + i, m), y ? I::loadm(y + i, m) : I::zero());
        }
        for (int w = 1; w < A; w *= 2) {   // pairwise: (s0 + s1) + (s2 + s3)
            for (int j = 0; j + w < A; j += 2 * w) s[j] = I::add(s[j], s[j + w]);
        }
        return I::hsum(s[0]);
    }
    static float sum(int64_t n, const float * x) {
        return reduce_sum(n, x, nullptr, [](vf s, vf a, vf) { return I::add(s, a); });
    }
    static float sum_sq(int64_t n, const float * x) {
        return reduce_sum(n, x, nullptr, [](vf s, vf a, vf) { return I::fma(a, a, s); });
    }
    static float dot(int64_t n, const float * x, const float * y) {
        return reduce_sum(n, x, y, [](vf s, vf a, vf b) { return I::fma(a, b, s); });
    }

    static float max(int64_t n, const float * x) {
        vf m = I::set1(-INFINITY);
        int64_t i = 0;
        for (; i + I::W <= n; i += I::W) m = I::max(m, I::load(x + i));
        alignas(64) float lanes[I::W];
        I::store(lanes, m);
        float r = lanes[0];
        for (int j = 1; j < I::W; ++j) r = std::max(r, lanes[j]);
        for (; i < n; ++i) r = std::max(r, x[i]);
        return r;
    }

    static float exp_sum(int64_t n, float * y, const float * x, float mx) {
        const vf vm = I::set1(mx);
        vf s = I::zero();
        int64_t i = 0;
        for (; i + I::W <= n; i += I::W) {
            const vf e = I::exp(I::sub(I::load(x + i), vm));
            I::store(y + i, e);
            s = I::add(s, e);
        }
        if (i < n) {
            const auto m = I::tail(n - i);
            // lanes past the tail would add exp(0 - mx): zero them
            const vf e = I::keep(I::exp(I::sub(I::loadm(x + i, m), vm)), m);
            I::storem(y + i, m, e);
            s = I::add(s, e);
        }
        return I::hsum(s);
    }

    static void axpy(int64_t n, float * y, float a, const float * x) {
        const vf va = I::set1(a);
        vec_map2<I>(n, y, x, y, [&](vf xv, vf yv) { return I::fma(va, xv, yv); });
    }

    // four rows per pass: each chunk of x is loaded once for all of them
    static void dot_rows(int64_t n, const float * x, const float * const * rows, int64_t nr, float * out) {
        for (int64_t t = 0; t < nr; t += 4) {
            const int64_t k = std::min<int64_t>(4, nr - t);
            const float * r[4] = { rows[t], rows[t + (k > 1 ? 1 : 0)], rows[t + (k > 2 ? 2 : 0)], rows[t + (k > 3 ? 3 : 0)] };
            vf a[4] = { I::zero(), I::zero(), I::zero(), I::zero() };
            int64_t i = 0;
            for (; i + I::W <= n; i += I::W) {
                const vf xv = I::load(x + i);
                for (int j = 0; j < 4; ++j) a[j] = I::fma(xv, I::load(r[j] + i), a[j]);
            }
            if (i < n) {
                const auto m = I::tail(n - i);
                const vf xv = I::loadm(x + i, m);
                for (int j = 0; j < 4; ++j) a[j] = I::fma(xv, I::loadm(r[j] + i, m), a[j]);
            }
            for (int64_t j = 0; j < k; ++j) out[t + j] = I::hsum(a[j]);
        }
    }

    // y stays in registers (4 vectors at a time) while all rows are added into it
    static void axpy_rows(int64_t n, float * y, const float * a, const float * const * rows, int64_t nr) {
        int64_t i = 0;
        for (; i + 4 * I::W <= n; i += 4 * I::W) {
            vf acc[4];
            for (int c = 0; c < 4; ++c) acc[c] = I::load(y + i + c * I::W);
            for (int64_t t = 0; t < nr; ++t) {
                const vf va = I::set1(a[t]);
                for (int c = 0; c < 4; ++c) acc[c] = I::fma(va, I::load(rows[t] + i + c * I::W), acc[c]);
            }
            for (int c = 0; c < 4; ++c) I::store(y + i + c * I::W, acc[c]);
        }
        for (; i < n; i += I::W) {
            const auto m = I::tail(std::min<int64_t>(I::W, n - i));
            vf acc = I::loadm(y + i, m);
            for (int64_t t = 0; t < nr; ++t) acc = I::fma(I::set1(a[t]), I::loadm(rows[t] + i, m), acc);
            I::storem(y + i, m, acc);
        }
    }

    // the entries above; the ISA file adds its own
    static void fill(ggml_cpu_vec_fns & f) {
        f.add = add;
        f.sub = sub;
        f.mul = mul;
        f.div = div;
        f.scale_bias = scale_bias;
        f.silu = silu;
        f.gelu = gelu;
        f.swiglu = swiglu;
        f.sum = sum;
        f.sum_sq = sum_sq;
        f.max = max;
        f.exp_sum = exp_sum;
        f.dot = dot;
        f.axpy = axpy;
        f.dot_rows = dot_rows;
        f.axpy_rows = axpy_rows;
    }
};

} // namespace
