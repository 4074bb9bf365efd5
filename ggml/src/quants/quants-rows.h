// Row drivers shared by the quantizer families: the whole-tensor entry points
// (ggml_type_traits::quantize) all walk rows the same way and refuse non-finite input, one NaN
// would poison a block's scale silently. Kept in one place so the rule cannot drift between
// families. (Not in quants-common.h: every SIMD kernel includes that one.)
#pragma once

#include "ggml-impl.h"

#include <cmath>
#include <cstdint>

inline bool rows_finite(const float * x, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
        if (!std::isfinite(x[i])) return false;
    }
    return true;
}

// Drive a row encoder over nrows rows of `type`; 0 (nothing written) if any value is not finite.
template <typename Row>
size_t quantize_rows(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row, Row row) {
    if (!rows_finite(src, nrows * n_per_row)) return 0;
    const size_t row_size = ggml_row_size(type, n_per_row);
    for (int64_t r = 0; r < nrows; ++r) row(src + r * n_per_row, (uint8_t *) dst + r * row_size);
    return nrows * row_size;
}
