// GGUF reading and writing (ggml/src/gguf.cpp, gguf-split.cpp):
//   - every metadata type and several tensor types survive a write -> read round trip;
//   - the bytes written match the layout of the spec, built independently here;
//   - a suite of crafted malformed files is rejected, each with its own message;
//   - every shared model / vocab file parses, and a reference-written model is rewritten
//     byte-for-byte;
//   - split models open as one set; a missing part is named.
#include "testing.h"

#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// A temporary directory removed at the end of each test.
struct temp_dir {
    std::string path;
    temp_dir() {
        char tmpl[] = "/tmp/kiln-test-gguf-XXXXXX";
        const char * p = mkdtemp(tmpl);
        if (!p) throw std::runtime_error("mkdtemp failed");
        path = p;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string & name) const { return path + "/" + name; }
};

std::vector<uint8_t> read_all(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const std::string & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write((const char *) bytes.data(), (std::streamsize) bytes.size());
}

// Little-endian byte builder, independent of the writer under test.
struct bytes {
    std::vector<uint8_t> b;
    template <typename T> bytes & put(T v) {
        uint8_t tmp[sizeof(T)];
        std::memcpy(tmp, &v, sizeof(T));
        b.insert(b.end(), tmp, tmp + sizeof(T));
        return *this;
    }
    bytes & u8(uint8_t v)   { return put(v); }
    bytes & u32(uint32_t v) { return put(v); }
    bytes & u64(uint64_t v) { return put(v); }
    bytes & i64(int64_t v)  { return put(v); }
    bytes & raw(const std::string & s) { b.insert(b.end(), s.begin(), s.end()); return *this; }
    bytes & str(const std::string & s) { u64(s.size()); return raw(s); }
    bytes & pad(size_t align) { b.resize((b.size() + align - 1) / align * align, 0); return *this; }
    size_t size() const { return b.size(); }
};

// A fake ggml_tensor (no context needed) to hand to gguf_add_tensor.
ggml_tensor make_tensor(const char * name, ggml_type type, std::vector<int64_t> ne, const void * data) {
    ggml_tensor t;
    std::memset(&t, 0, sizeof(t));
    t.type = type;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) t.ne[d] = d < (int) ne.size() ? ne[d] : 1;
    std::snprintf(t.name, sizeof(t.name), "%s", name);
    t.data = const_cast<void *>(data);
    return t;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto & x : v) x = (uint8_t) rng();
    return v;
}

gguf_context * parse_buffer(const std::vector<uint8_t> & buf, const char * name = "crafted.gguf") {
    gguf_init_params params = { true, nullptr };
    return gguf_init_from_buffer(buf.data(), buf.size(), name, params);
}

// ---------------------------------------------------------------------------------------------
// Round trip

struct test_tensor {
    const char *         name;
    ggml_type            type;
    std::vector<int64_t> ne;
    size_t               expected_bytes;   // from the table in docs/FORMATS.md, computed by hand
    std::vector<uint8_t> data;
};

std::vector<test_tensor> round_trip_tensors() {
    std::vector<test_tensor> ts = {
        { "f32.weight",    GGML_TYPE_F32,    { 7, 3 },        7 * 3 * 4, {} },
        { "f16.weight",    GGML_TYPE_F16,    { 16 },          16 * 2, {} },
        { "q8_0.weight",   GGML_TYPE_Q8_0,   { 64, 2 },       2 * 2 * 34, {} },
        { "q4_K.weight",   GGML_TYPE_Q4_K,   { 512, 2, 3 },   6 * 2 * 144, {} },
        { "iq4_ks.weight", GGML_TYPE_IQ4_KS, { 256, 3 },      3 * (4 + 136), {} },   // 4 bytes of row scale
        { "i32.ids",       GGML_TYPE_I32,    { 5, 1, 1, 2 },  10 * 4, {} },
    };
    uint32_t seed = 1;
    for (auto & t : ts) t.data = random_bytes(t.expected_bytes, seed++);
    return ts;
}

TEST(GgufRoundTrip, EveryMetadataTypeAndTensorType) {
    temp_dir tmp;
    const std::string path = tmp.file("all.gguf");

    const uint8_t  a_u8[]  = { 0, 1, 255 };
    const int8_t   a_i8[]  = { -128, 0, 127 };
    const uint16_t a_u16[] = { 0, 65535 };
    const int16_t  a_i16[] = { -32768, 32767, 5 };
    const uint32_t a_u32[] = { 1, 2, 4294967295u };
    const int32_t  a_i32[] = { -2147483647 - 1, 7 };
    const float    a_f32[] = { 1.5f, -0.0f, 3.4e38f, 1e-45f };
    const uint64_t a_u64[] = { 18446744073709551615ull, 0 };
    const int64_t  a_i64[] = { INT64_MIN, INT64_MAX, -1 };
    const double   a_f64[] = { 3.141592653589793, -1e300 };
    const bool     a_bool[] = { true, false, true };
    const char *   a_str[] = { "hello", "", "w\xc3\xb6rld", "\xff\xfe not utf-8" };

    std::vector<test_tensor> ts = round_trip_tensors();
    {
        gguf_context * ctx = gguf_init_empty();
        gguf_set_val_u8  (ctx, "t.u8", 200);
        gguf_set_val_i8  (ctx, "t.i8", -100);
        gguf_set_val_u16 (ctx, "t.u16", 60000);
        gguf_set_val_i16 (ctx, "t.i16", -30000);
        gguf_set_val_u32 (ctx, "t.u32", 4000000000u);
        gguf_set_val_i32 (ctx, "t.i32", -2000000000);
        gguf_set_val_f32 (ctx, "t.f32", 0.1f);
        gguf_set_val_u64 (ctx, "t.u64", 0xfedcba9876543210ull);
        gguf_set_val_i64 (ctx, "t.i64", -0x123456789abcdefll);
        gguf_set_val_f64 (ctx, "t.f64", 2.718281828459045);
        gguf_set_val_bool(ctx, "t.bool_t", true);
        gguf_set_val_bool(ctx, "t.bool_f", false);
        gguf_set_val_str (ctx, "t.str", "a string with \"quotes\" and \xe2\x9c\x93");
        gguf_set_val_str (ctx, "t.str_empty", "");
        gguf_set_arr_data(ctx, "a.u8",  GGUF_TYPE_UINT8,  a_u8,  3);
        gguf_set_arr_data(ctx, "a.i8",  GGUF_TYPE_INT8,   a_i8,  3);
        gguf_set_arr_data(ctx, "a.u16", GGUF_TYPE_UINT16, a_u16, 2);
        gguf_set_arr_data(ctx, "a.i16", GGUF_TYPE_INT16,  a_i16, 3);
        gguf_set_arr_data(ctx, "a.u32", GGUF_TYPE_UINT32, a_u32, 3);
        gguf_set_arr_data(ctx, "a.i32", GGUF_TYPE_INT32,  a_i32, 2);
        gguf_set_arr_data(ctx, "a.f32", GGUF_TYPE_FLOAT32, a_f32, 4);
        gguf_set_arr_data(ctx, "a.u64", GGUF_TYPE_UINT64, a_u64, 2);
        gguf_set_arr_data(ctx, "a.i64", GGUF_TYPE_INT64,  a_i64, 3);
        gguf_set_arr_data(ctx, "a.f64", GGUF_TYPE_FLOAT64, a_f64, 2);
        gguf_set_arr_data(ctx, "a.bool", GGUF_TYPE_BOOL,  a_bool, 3);
        gguf_set_arr_str (ctx, "a.str", a_str, 4);
        gguf_set_arr_data(ctx, "a.empty_i32", GGUF_TYPE_INT32, nullptr, 0);
        gguf_set_arr_str (ctx, "a.empty_str", nullptr, 0);
        // replacing keeps the key's position and changes its type
        gguf_set_val_u32(ctx, "t.replaced", 1);
        gguf_set_val_str(ctx, "t.replaced", "now a string");
        gguf_set_val_str(ctx, "t.removed", "gone");
        gguf_remove_key(ctx, "t.removed");
        for (auto & t : ts) {
            ggml_tensor gt = make_tensor(t.name, t.type, t.ne, t.data.data());
            gguf_add_tensor(ctx, &gt);
        }
        ASSERT_TRUE(gguf_write_to_file(ctx, path.c_str(), false)) << gguf_last_error();
        gguf_free(ctx);
    }
    EXPECT_FALSE(fs::exists(path + ".tmp"));

    gguf_init_params params = { true, nullptr };
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_get_version(ctx), 3u);
    EXPECT_EQ(gguf_get_alignment(ctx), 32u);
    EXPECT_EQ(gguf_get_n_kv(ctx), 29);

    auto key = [&](const char * k) {
        const int64_t id = gguf_find_key(ctx, k);
        EXPECT_GE(id, 0) << k;
        return id;
    };
    EXPECT_EQ(gguf_get_val_u8 (ctx, key("t.u8")), 200);
    EXPECT_EQ(gguf_get_val_i8 (ctx, key("t.i8")), -100);
    EXPECT_EQ(gguf_get_val_u16(ctx, key("t.u16")), 60000);
    EXPECT_EQ(gguf_get_val_i16(ctx, key("t.i16")), -30000);
    EXPECT_EQ(gguf_get_val_u32(ctx, key("t.u32")), 4000000000u);
    EXPECT_EQ(gguf_get_val_i32(ctx, key("t.i32")), -2000000000);
    EXPECT_EQ(gguf_get_val_f32(ctx, key("t.f32")), 0.1f);
    EXPECT_EQ(gguf_get_val_u64(ctx, key("t.u64")), 0xfedcba9876543210ull);
    EXPECT_EQ(gguf_get_val_i64(ctx, key("t.i64")), -0x123456789abcdefll);
    EXPECT_EQ(gguf_get_val_f64(ctx, key("t.f64")), 2.718281828459045);
    EXPECT_TRUE(gguf_get_val_bool(ctx, key("t.bool_t")));
    EXPECT_FALSE(gguf_get_val_bool(ctx, key("t.bool_f")));
    EXPECT_STREQ(gguf_get_val_str(ctx, key("t.str")), "a string with \"quotes\" and \xe2\x9c\x93");
    EXPECT_EQ(gguf_get_val_str_len(ctx, key("t.str_empty")), 0u);
    EXPECT_STREQ(gguf_get_val_str(ctx, key("t.str_empty")), "");
    EXPECT_EQ(gguf_get_kv_type(ctx, key("t.bool_t")), GGUF_TYPE_BOOL);
    EXPECT_EQ(gguf_get_kv_type(ctx, key("t.f64")), GGUF_TYPE_FLOAT64);
    EXPECT_EQ(gguf_find_key(ctx, "t.removed"), -1);
    EXPECT_EQ(key("t.replaced"), 28);   // kept its slot after the arrays
    EXPECT_EQ(gguf_get_kv_type(ctx, key("t.replaced")), GGUF_TYPE_STRING);
    EXPECT_STREQ(gguf_get_val_str(ctx, key("t.replaced")), "now a string");
    EXPECT_STREQ(gguf_get_key(ctx, 0), "t.u8");   // insertion order

    auto check_arr = [&](const char * k, gguf_type type, const void * expect, size_t n, size_t elem) {
        const int64_t id = key(k);
        ASSERT_EQ(gguf_get_kv_type(ctx, id), GGUF_TYPE_ARRAY) << k;
        ASSERT_EQ(gguf_get_arr_type(ctx, id), type) << k;
        ASSERT_EQ(gguf_get_arr_n(ctx, id), n) << k;
        if (n) EXPECT_EQ(std::memcmp(gguf_get_arr_data(ctx, id), expect, n * elem), 0) << k;
    };
    check_arr("a.u8",  GGUF_TYPE_UINT8,  a_u8,  3, 1);
    check_arr("a.i8",  GGUF_TYPE_INT8,   a_i8,  3, 1);
    check_arr("a.u16", GGUF_TYPE_UINT16, a_u16, 2, 2);
    check_arr("a.i16", GGUF_TYPE_INT16,  a_i16, 3, 2);
    check_arr("a.u32", GGUF_TYPE_UINT32, a_u32, 3, 4);
    check_arr("a.i32", GGUF_TYPE_INT32,  a_i32, 2, 4);
    check_arr("a.f32", GGUF_TYPE_FLOAT32, a_f32, 4, 4);
    check_arr("a.u64", GGUF_TYPE_UINT64, a_u64, 2, 8);
    check_arr("a.i64", GGUF_TYPE_INT64,  a_i64, 3, 8);
    check_arr("a.f64", GGUF_TYPE_FLOAT64, a_f64, 2, 8);
    check_arr("a.bool", GGUF_TYPE_BOOL,  a_bool, 3, 1);
    check_arr("a.empty_i32", GGUF_TYPE_INT32, nullptr, 0, 4);
    {
        const int64_t id = key("a.str");
        ASSERT_EQ(gguf_get_arr_type(ctx, id), GGUF_TYPE_STRING);
        ASSERT_EQ(gguf_get_arr_n(ctx, id), 4u);
        for (size_t i = 0; i < 4; ++i) {
            EXPECT_STREQ(gguf_get_arr_str(ctx, id, i), a_str[i]);
            EXPECT_EQ(gguf_get_arr_str_len(ctx, id, i), std::strlen(a_str[i]));
        }
        const int64_t e = key("a.empty_str");
        EXPECT_EQ(gguf_get_arr_type(ctx, e), GGUF_TYPE_STRING);
        EXPECT_EQ(gguf_get_arr_n(ctx, e), 0u);
    }

    ASSERT_EQ(gguf_get_n_tensors(ctx), (int64_t) ts.size());
    size_t expect_off = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
        const int64_t id = gguf_find_tensor(ctx, ts[i].name);
        ASSERT_EQ(id, (int64_t) i);
        EXPECT_EQ(gguf_get_tensor_type(ctx, id), ts[i].type);
        EXPECT_EQ(gguf_get_tensor_size(ctx, id), ts[i].expected_bytes) << ts[i].name;
        EXPECT_EQ(gguf_get_tensor_offset(ctx, id), expect_off) << ts[i].name;
        int n_dims = 1;
        for (size_t d = 0; d < ts[i].ne.size(); ++d) if (ts[i].ne[d] != 1) n_dims = (int) d + 1;
        EXPECT_EQ(gguf_get_tensor_n_dims(ctx, id), n_dims) << ts[i].name;
        for (int d = 0; d < 4; ++d) {
            EXPECT_EQ(gguf_get_tensor_ne(ctx, id, d), d < (int) ts[i].ne.size() ? ts[i].ne[d] : 1);
        }
        expect_off += (ts[i].expected_bytes + 31) / 32 * 32;
    }
    EXPECT_EQ(gguf_find_tensor(ctx, "nope"), -1);
    EXPECT_EQ(gguf_get_file_size(ctx), gguf_get_data_offset(ctx) + expect_off);

    // The tensor bytes in the file.
    const std::vector<uint8_t> file = read_all(path);
    for (size_t i = 0; i < ts.size(); ++i) {
        const size_t off = gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, (int64_t) i);
        ASSERT_LE(off + ts[i].data.size(), file.size());
        EXPECT_EQ(std::memcmp(file.data() + off, ts[i].data.data(), ts[i].data.size()), 0) << ts[i].name;
    }
    gguf_free(ctx);
}

TEST(GgufRoundTrip, GgmlContextWithData) {
    temp_dir tmp;
    const std::string path = tmp.file("ctx.gguf");
    std::vector<test_tensor> ts = round_trip_tensors();
    {
        gguf_context * ctx = gguf_init_empty();
        gguf_set_val_str(ctx, "general.architecture", "test");
        for (auto & t : ts) {
            ggml_tensor gt = make_tensor(t.name, t.type, t.ne, t.data.data());
            gguf_add_tensor(ctx, &gt);
        }
        ASSERT_TRUE(gguf_write_to_file(ctx, path.c_str(), false)) << gguf_last_error();
        gguf_free(ctx);
    }
    for (bool no_alloc : { true, false }) {
        ggml_context * gctx = nullptr;
        gguf_init_params params = { no_alloc, &gctx };
        gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
        ASSERT_NE(ctx, nullptr) << gguf_last_error();
        ASSERT_NE(gctx, nullptr);
        size_t n = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(gctx); t; t = ggml_get_next_tensor(gctx, t), ++n) {
            ASSERT_LT(n, ts.size());
            EXPECT_STREQ(t->name, ts[n].name);
            EXPECT_EQ(t->type, ts[n].type);
            for (int d = 0; d < 4; ++d) EXPECT_EQ(t->ne[d], d < (int) ts[n].ne.size() ? ts[n].ne[d] : 1);
            EXPECT_EQ(ggml_nbytes(t), ts[n].expected_bytes);
            if (no_alloc) {
                EXPECT_EQ(t->data, nullptr);
            } else {
                ASSERT_NE(t->data, nullptr);
                EXPECT_EQ(std::memcmp(t->data, ts[n].data.data(), ts[n].data.size()), 0) << ts[n].name;
            }
        }
        EXPECT_EQ(n, ts.size());
        // A context read with data can be written back unchanged.
        if (!no_alloc) {
            const std::string copy = tmp.file("copy.gguf");
            ASSERT_TRUE(gguf_write_to_file(ctx, copy.c_str(), false)) << gguf_last_error();
            EXPECT_EQ(read_all(copy), read_all(path));
        }
        ggml_free(gctx);
        gguf_free(ctx);
    }
}

TEST(GgufRoundTrip, SetKvAndAliasing) {
    gguf_context * src = gguf_init_empty();
    gguf_set_val_str(src, "name", "first");
    gguf_set_val_u32(src, GGUF_KEY_GENERAL_ALIGNMENT, 64);
    const char * two[2] = { "x", "yy" };
    gguf_set_arr_str(src, "list", two, 2);

    gguf_context * dst = gguf_init_empty();
    gguf_set_val_i32(dst, "name", 5);     // replaced in place by the copy
    gguf_set_val_i32(dst, "own", 6);
    gguf_set_kv(dst, src);
    ASSERT_EQ(gguf_get_n_kv(dst), 4);
    EXPECT_STREQ(gguf_get_key(dst, 0), "name");
    EXPECT_STREQ(gguf_get_val_str(dst, 0), "first");
    EXPECT_EQ(gguf_get_alignment(dst), 64u);
    EXPECT_STREQ(gguf_get_arr_str(dst, gguf_find_key(dst, "list"), 1), "yy");
    gguf_set_kv(dst, dst);   // no-op
    EXPECT_EQ(gguf_get_n_kv(dst), 4);

    // setting a value from a pointer into itself
    gguf_set_val_str(dst, "name", gguf_get_val_str(dst, 0));
    EXPECT_STREQ(gguf_get_val_str(dst, 0), "first");
    const int64_t l = gguf_find_key(dst, "list");
    const char * again[2] = { gguf_get_arr_str(dst, l, 1), gguf_get_arr_str(dst, l, 0) };
    gguf_set_arr_str(dst, "list", again, 2);
    EXPECT_STREQ(gguf_get_arr_str(dst, l, 0), "yy");
    EXPECT_STREQ(gguf_get_arr_str(dst, l, 1), "x");

    gguf_remove_key(dst, GGUF_KEY_GENERAL_ALIGNMENT);
    EXPECT_EQ(gguf_get_alignment(dst), 32u);
    EXPECT_DEATH(gguf_get_val_u32(dst, 0), "is str, read as u32");
    gguf_free(dst);
    gguf_free(src);
}

// The writer's bytes, compared with the layout of the spec built field by field.
TEST(GgufLayout, BytesMatchSpec) {
    temp_dir tmp;
    const std::string path = tmp.file("small.gguf");
    const float w[3] = { 1.0f, 2.0f, -3.0f };
    const uint16_t h[4] = { 0x3c00, 0x4000, 0xc000, 0x0000 };
    const int32_t arr[2] = { 7, -7 };
    const char * strs[2] = { "ab", "" };
    {
        gguf_context * ctx = gguf_init_empty();
        gguf_set_val_str(ctx, "general.architecture", "llama");
        gguf_set_val_u32(ctx, "n", 42);
        gguf_set_arr_data(ctx, "ai", GGUF_TYPE_INT32, arr, 2);
        gguf_set_arr_str(ctx, "as", strs, 2);
        gguf_set_val_bool(ctx, "b", true);
        ggml_tensor t1 = make_tensor("w", GGML_TYPE_F32, { 3 }, w);
        ggml_tensor t2 = make_tensor("h", GGML_TYPE_F16, { 2, 2, 1 }, h);
        gguf_add_tensor(ctx, &t1);
        gguf_add_tensor(ctx, &t2);
        EXPECT_EQ(gguf_get_tensor_offset(ctx, 1), 32u);
        ASSERT_TRUE(gguf_write_to_file(ctx, path.c_str(), false)) << gguf_last_error();

        // gguf_get_meta_* give the metadata part of the same bytes.
        const size_t meta = gguf_get_meta_size(ctx);
        std::vector<uint8_t> buf(meta);
        gguf_get_meta_data(ctx, buf.data());
        const std::vector<uint8_t> file = read_all(path);
        ASSERT_LE(meta, file.size());
        EXPECT_EQ(meta % 32, 0u);
        EXPECT_TRUE(std::equal(buf.begin(), buf.end(), file.begin()));
        gguf_free(ctx);
    }

    bytes e;
    e.raw("GGUF").u32(3).u64(2).u64(5);
    e.str("general.architecture").u32(8).str("llama");
    e.str("n").u32(4).u32(42);
    e.str("ai").u32(9).u32(5).u64(2).put<int32_t>(7).put<int32_t>(-7);
    e.str("as").u32(9).u32(8).u64(2).str("ab").str("");
    e.str("b").u32(7).u8(1);
    e.str("w").u32(1).i64(3).u32(0).u64(0);
    e.str("h").u32(2).i64(2).i64(2).u32(1).u64(32);   // trailing dimension of 1 dropped
    e.pad(32);
    const size_t data_start = e.size();
    for (float v : w) e.put(v);
    e.pad(32);
    for (uint16_t v : h) e.put(v);
    e.pad(32);

    const std::vector<uint8_t> got = read_all(path);
    ASSERT_EQ(got.size(), e.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], e.b[i]) << "first difference at byte " << i;
    }
    gguf_init_params params = { true, nullptr };
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_get_data_offset(ctx), data_start);
    gguf_free(ctx);
}

TEST(GgufLayout, CustomAlignmentAndOnlyMeta) {
    temp_dir tmp;
    const std::string path = tmp.file("a64.gguf");
    const std::vector<uint8_t> d1 = random_bytes(40, 9), d2 = random_bytes(8, 10);
    gguf_context * ctx = gguf_init_empty();
    ggml_tensor t1 = make_tensor("t1", GGML_TYPE_F32, { 10 }, d1.data());
    ggml_tensor t2 = make_tensor("t2", GGML_TYPE_F16, { 4 }, d2.data());
    gguf_add_tensor(ctx, &t1);
    gguf_add_tensor(ctx, &t2);
    EXPECT_EQ(gguf_get_tensor_offset(ctx, 1), 64u);   // 40 bytes padded to 32
    gguf_set_val_u32(ctx, GGUF_KEY_GENERAL_ALIGNMENT, 128);
    EXPECT_EQ(gguf_get_alignment(ctx), 128u);
    EXPECT_EQ(gguf_get_tensor_offset(ctx, 1), 128u);  // offsets follow the new alignment
    ASSERT_TRUE(gguf_write_to_file(ctx, path.c_str(), false)) << gguf_last_error();
    const size_t meta = gguf_get_meta_size(ctx);
    EXPECT_EQ(meta % 128, 0u);
    EXPECT_EQ(fs::file_size(path), meta + 256);

    gguf_init_params params = { true, nullptr };
    gguf_context * rd = gguf_init_from_file(path.c_str(), params);
    ASSERT_NE(rd, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_get_alignment(rd), 128u);
    EXPECT_EQ(gguf_get_data_offset(rd), meta);
    EXPECT_EQ(gguf_get_tensor_offset(rd, 1), 128u);
    gguf_free(rd);

    // only_meta: the metadata alone (what a streaming writer puts before the data)
    const std::string mpath = tmp.file("meta.gguf");
    ASSERT_TRUE(gguf_write_to_file(ctx, mpath.c_str(), true));
    EXPECT_EQ(fs::file_size(mpath), meta);

    // a tensor without data cannot be written, and nothing is left behind
    gguf_set_tensor_type(ctx, "t2", GGML_TYPE_F32);   // drops the data pointer
    EXPECT_EQ(gguf_get_tensor_size(ctx, 1), 16u);
    const std::string bad = tmp.file("bad.gguf");
    EXPECT_FALSE(gguf_write_to_file(ctx, bad.c_str(), false));
    EXPECT_NE(std::string(gguf_last_error()).find("tensor 't2' has no data"), std::string::npos) << gguf_last_error();
    EXPECT_FALSE(fs::exists(bad));
    EXPECT_FALSE(fs::exists(bad + ".tmp"));
    gguf_free(ctx);
}

// ---------------------------------------------------------------------------------------------
// Malformed files

// A small valid file, described field by field so each case can break one thing.
struct crafted {
    std::string magic = "GGUF";
    uint32_t version = 3;
    int64_t n_tensors_override = -1, n_kv_override = -1;
    std::vector<std::vector<uint8_t>> kvs;      // encoded key/value pairs
    struct tensor { std::string name; uint32_t n_dims; std::vector<int64_t> ne; uint32_t type; uint64_t offset; };
    std::vector<tensor> tensors;
    size_t alignment = 32;
    size_t data_bytes = 64;                      // bytes after the aligned header
    bool pad_header = true;

    static std::vector<uint8_t> kv_u32(const std::string & k, uint32_t v) { bytes b; b.str(k).u32(4).u32(v); return b.b; }
    static std::vector<uint8_t> kv_str(const std::string & k, const std::string & v) { bytes b; b.str(k).u32(8).str(v); return b.b; }

    crafted() {
        kvs.push_back(kv_str("general.architecture", "llama"));
        kvs.push_back(kv_u32("llama.block_count", 1));
        tensors.push_back({ "a.weight", 2, { 4, 2 }, 0, 0 });    // f32, 32 bytes
        tensors.push_back({ "b.weight", 1, { 8 }, 1, 32 });      // f16, 16 bytes
    }

    std::vector<uint8_t> build() const {
        bytes b;
        b.raw(magic).u32(version);
        b.u64(n_tensors_override >= 0 ? (uint64_t) n_tensors_override : tensors.size());
        b.u64(n_kv_override >= 0 ? (uint64_t) n_kv_override : kvs.size());
        for (auto & kv : kvs) b.b.insert(b.b.end(), kv.begin(), kv.end());
        for (auto & t : tensors) {
            b.str(t.name).u32(t.n_dims);
            for (auto v : t.ne) b.i64(v);
            b.u32(t.type).u64(t.offset);
        }
        if (pad_header) b.pad(alignment);
        b.b.resize(b.size() + data_bytes, 0);
        return b.b;
    }
};

struct malformed_case {
    const char * what;
    std::vector<uint8_t> file;
    const char * expect;    // substring of the error
};

std::vector<uint8_t> truncate(std::vector<uint8_t> v, size_t n) { v.resize(n); return v; }

std::vector<malformed_case> malformed_cases() {
    std::vector<malformed_case> cs;
    auto add = [&](const char * what, const crafted & c, const char * expect) { cs.push_back({ what, c.build(), expect }); };
    auto edit = [](auto fn) { crafted c; fn(c); return c; };

    const std::vector<uint8_t> good = crafted().build();
    cs.push_back({ "empty", {}, "only 0 bytes" });
    cs.push_back({ "3 bytes", truncate(good, 3), "only 3 bytes" });
    add("bad magic", edit([](crafted & c) { c.magic = "GGML"; }), "bad magic \"GGML\"");
    add("version 1", edit([](crafted & c) { c.version = 1; }), "version 1 is not supported");
    add("version 4", edit([](crafted & c) { c.version = 4; }), "unsupported GGUF version 4");
    add("version 0", edit([](crafted & c) { c.version = 0; }), "unsupported GGUF version 0");
    add("big-endian", edit([](crafted & c) { c.version = 0x03000000; }), "big-endian");
    cs.push_back({ "cut in version", truncate(good, 6), "truncated file: version" });
    cs.push_back({ "cut in tensor count", truncate(good, 12), "truncated file: tensor count" });
    cs.push_back({ "cut in kv count", truncate(good, 20), "truncated file: key/value count" });
    add("absurd n_kv", edit([](crafted & c) { c.n_kv_override = 1ll << 60; }), "key/value count 1152921504606846976 does not fit in the");
    add("absurd n_tensors", edit([](crafted & c) { c.n_tensors_override = 1ll << 40; }), "tensor count 1099511627776 does not fit in the");
    add("key length absurd", edit([](crafted & c) {
        bytes b; b.u64(1ull << 62).raw("xx").u32(4).u32(0); c.kvs.insert(c.kvs.begin(), b.b);
    }), "key 0 at offset 24 has length 4611686018427387904");
    add("empty key", edit([](crafted & c) { c.kvs.push_back(crafted::kv_u32("", 1)); }), "key 2 is empty");
    add("duplicate key", edit([](crafted & c) { c.kvs.push_back(crafted::kv_u32("llama.block_count", 2)); }),
        "duplicate key 'llama.block_count'");
    add("unknown value type", edit([](crafted & c) { bytes b; b.str("k").u32(13).u32(0); c.kvs.push_back(b.b); }),
        "key 'k' has unknown value type 13");
    {
        crafted c;
        c.tensors.clear();
        c.data_bytes = 0;
        c.pad_header = false;
        bytes b; b.str("k").u32(4).u8(1).u8(2); c.kvs.push_back(b.b);    // u32 cut after 2 bytes
        cs.push_back({ "truncated value", c.build(), "truncated file: value of key 'k'" });
    }
    add("string value too long", edit([](crafted & c) { bytes b; b.str("s").u32(8).u64(1000000).raw("abc"); c.kvs.push_back(b.b); }),
        "value of key 's' at offset");
    add("nested array", edit([](crafted & c) { bytes b; b.str("aa").u32(9).u32(9).u64(1).u32(4).u64(1).u32(5); c.kvs.push_back(b.b); }),
        "key 'aa' is an array of arrays");
    add("array of unknown type", edit([](crafted & c) { bytes b; b.str("au").u32(9).u32(99).u64(1).u32(5); c.kvs.push_back(b.b); }),
        "key 'au' is an array with unknown element type 99");
    add("array count absurd", edit([](crafted & c) { bytes b; b.str("ac").u32(9).u32(4).u64(1ull << 40).u32(5); c.kvs.push_back(b.b); }),
        "array of 1099511627776 u32 elements needs more than");
    add("string array count absurd", edit([](crafted & c) { bytes b; b.str("as").u32(9).u32(8).u64(1ull << 50).str("x"); c.kvs.push_back(b.b); }),
        "key 'as': array of 1125899906842624 strings needs more than");
    add("string array element too long", edit([](crafted & c) {
        bytes b; b.str("toks").u32(9).u32(8).u64(3).str("a").u64(1ull << 33).raw("b").str("c"); c.kvs.push_back(b.b);
    }), "string 1 of array 'toks'");
    {
        crafted c;
        c.tensors.clear();
        c.data_bytes = 0;
        c.pad_header = false;
        bytes b; b.str("toks").u32(9).u32(8).u64(3).str("a long first string").str("b"); c.kvs.push_back(b.b);   // third missing
        cs.push_back({ "string array cut", c.build(), "truncated file: string 2 of array 'toks'" });
    }
    add("alignment wrong type", edit([](crafted & c) {
        bytes b; b.str("general.alignment").u32(10).u64(32); c.kvs.push_back(b.b);
    }), "key 'general.alignment' must be of type u32, but is u64");
    add("alignment not a power of two", edit([](crafted & c) { c.kvs.push_back(crafted::kv_u32("general.alignment", 48)); }),
        "key 'general.alignment' is 48, not a power of two");
    add("alignment zero", edit([](crafted & c) { c.kvs.push_back(crafted::kv_u32("general.alignment", 0)); }),
        "key 'general.alignment' is 0, not a power of two");
    // found by fuzz-gguf: "gen@\0..." read back through gguf_get_key was another key
    add("key with a NUL byte", edit([](crafted & c) { c.kvs.push_back(crafted::kv_u32(std::string("gen\0al.x", 8), 1)); }),
        "key 2 'gen\\x00al.x' contains a NUL byte");
    add("tensor name with a NUL byte", edit([](crafted & c) { c.tensors[1].name = std::string("b\0.weight", 9); }),
        "tensor 1 name 'b\\x00.weight' contains a NUL byte");
    add("empty tensor name", edit([](crafted & c) { c.tensors[1].name = ""; }), "tensor 1 has an empty name");
    add("tensor name 64 bytes", edit([](crafted & c) { c.tensors[0].name = std::string(64, 'n'); }), "is 64 bytes long (at most 63)");
    add("duplicate tensor name", edit([](crafted & c) { c.tensors[1].name = "a.weight"; }), "duplicate tensor name 'a.weight'");
    add("n_dims 0", edit([](crafted & c) { c.tensors[0].n_dims = 0; c.tensors[0].ne.clear(); }), "tensor 'a.weight' has 0 dimensions");
    add("n_dims 5", edit([](crafted & c) { c.tensors[0].n_dims = 5; c.tensors[0].ne = { 1, 1, 1, 1, 1 }; }), "tensor 'a.weight' has 5 dimensions");
    add("ne zero", edit([](crafted & c) { c.tensors[0].ne = { 4, 0 }; }), "tensor 'a.weight': dimension 1 is 0");
    add("ne negative", edit([](crafted & c) { c.tensors[0].ne = { -4, 2 }; }), "tensor 'a.weight': dimension 0 is -4");
    add("element count overflow", edit([](crafted & c) { c.tensors[0].ne = { 1ll << 32, 1ll << 32 }; }), "overflows the element count");
    add("byte size overflow", edit([](crafted & c) { c.tensors[0].ne = { 1ll << 31, 1ll << 31 }; }), "tensor 'a.weight': byte size overflows");
    add("unknown ggml type", edit([](crafted & c) { c.tensors[1].type = 5; }), "tensor 'b.weight' has unknown ggml type id 5");
    add("unknown ggml type large", edit([](crafted & c) { c.tensors[1].type = 0xffffffffu; }), "unknown ggml type id 4294967295");
    add("removed ARM type", edit([](crafted & c) { c.tensors[1].type = 32; }),
        "tensor 'b.weight' has ggml type id 32: a removed ARM layout of llama.cpp");
    add("I2_S type", edit([](crafted & c) { c.tensors[1].type = 36; }), "tensor 'b.weight' has ggml type id 36: I2_S");
    add("row not a multiple of the block", edit([](crafted & c) { c.tensors[0].type = 2; c.tensors[0].ne = { 20, 2 }; }),
        "row length 20 is not a multiple of the q4_0 block size 32");
    add("rows not a multiple of the interleave", edit([](crafted & c) { c.tensors[0].type = 208; c.tensors[0].ne = { 32, 3 }; }),
        "3 rows is not a multiple of 8");
    add("offset not aligned", edit([](crafted & c) { c.tensors[1].offset = 40; }), "tensor 'b.weight' has data offset 40, not a multiple of the alignment 32");
    add("data past end of file", edit([](crafted & c) { c.tensors[1].offset = 64; }), "tensor 'b.weight' data (16 bytes");
    add("overlapping tensors", edit([](crafted & c) { c.tensors[0].ne = { 16, 2 }; c.data_bytes = 256; }), "tensor 'a.weight' data [0, 128) overlaps");
    add("overlapping tensors reversed", edit([](crafted & c) { c.tensors[0].offset = 32; c.tensors[1].offset = 0; c.tensors[1].ne = { 32 }; }),
        "tensor 'b.weight' data [0, 64) overlaps tensor 'a.weight'");
    add("data section past end", edit([](crafted & c) { c.pad_header = false; c.data_bytes = 0; }), "tensor data section would start at offset");
    {
        // cut inside the second tensor's info: locate it by its name
        const std::vector<uint8_t> g = crafted().build();
        const std::string name = "b.weight";
        const size_t at = std::search(g.begin(), g.end(), name.begin(), name.end()) - g.begin() + name.size();
        cs.push_back({ "cut in n_dims", truncate(g, at + 2), "truncated file: n_dims of tensor 'b.weight'" });
        cs.push_back({ "cut in shape", truncate(g, at + 4 + 3), "truncated file: shape of tensor 'b.weight'" });
        cs.push_back({ "cut in type", truncate(g, at + 12 + 1), "truncated file: type of tensor 'b.weight'" });
        cs.push_back({ "cut in offset", truncate(g, at + 16 + 7), "truncated file: data offset of tensor 'b.weight'" });
        cs.push_back({ "cut in name", truncate(g, at - 3), "name of tensor 1 at offset" });
    }
    add("non-UTF-8 names are fine, but long ones are not", edit([](crafted & c) { c.tensors[0].name = std::string(70, '\xff'); }),
        "\\xff\\xff");
    return cs;
}

TEST(GgufMalformed, EachRejectedWithItsMessage) {
    temp_dir tmp;
    const std::vector<malformed_case> cs = malformed_cases();
    EXPECT_GE(cs.size(), 30u);
    std::printf("%zu malformed files\n", cs.size());
    int i = 0;
    for (const auto & c : cs) {
        const std::string path = tmp.file("bad" + std::to_string(i++) + ".gguf");
        write_all(path, c.file);
        ggml_context * gctx = (ggml_context *) 0x1;   // must be reset to NULL on failure
        gguf_init_params params = { false, &gctx };
        gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
        EXPECT_EQ(ctx, nullptr) << c.what;
        EXPECT_EQ(gctx, nullptr) << c.what;
        if (ctx) {
            gguf_free(ctx);
            continue;
        }
        const std::string err = gguf_last_error();
        EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": got \"" << err << "\", expected \"" << c.expect << "\"";
        EXPECT_EQ(err.rfind(path + ": ", 0), 0u) << c.what << ": message does not name the file: " << err;

        // the same from memory
        gguf_context * mctx = parse_buffer(c.file, "mem.gguf");
        EXPECT_EQ(mctx, nullptr) << c.what;
        if (mctx) gguf_free(mctx);
        EXPECT_NE(std::string(gguf_last_error()).find(c.expect), std::string::npos) << c.what << ": " << gguf_last_error();
    }
}

TEST(GgufMalformed, TheBaseOfTheSuiteIsValid) {
    // so each malformed case fails for its own reason
    const std::vector<uint8_t> good = crafted().build();
    gguf_context * ctx = parse_buffer(good);
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_get_n_tensors(ctx), 2);
    EXPECT_EQ(gguf_get_tensor_size(ctx, 0), 32u);
    EXPECT_EQ(gguf_get_tensor_size(ctx, 1), 16u);
    gguf_free(ctx);
    // version 2 is read like version 3
    crafted v2;
    v2.version = 2;
    ctx = parse_buffer(v2.build());
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_get_version(ctx), 2u);
    gguf_free(ctx);
}

TEST(GgufMalformed, MissingFileAndDirectory) {
    gguf_init_params params = { true, nullptr };
    EXPECT_EQ(gguf_init_from_file("/nonexistent/dir/model.gguf", params), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("/nonexistent/dir/model.gguf: cannot open"), std::string::npos) << gguf_last_error();
    temp_dir tmp;
    EXPECT_EQ(gguf_init_from_file(tmp.path.c_str(), params), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("not a regular file"), std::string::npos) << gguf_last_error();
}

TEST(GgufMalformed, EveryTruncationOfTheHeaderIsRejected) {
    // A file with every kind of field; cut at each byte of its metadata.
    crafted c;
    bytes arr; arr.str("toks").u32(9).u32(8).u64(3).str("one").str("").str("three");
    c.kvs.push_back(arr.b);
    bytes farr; farr.str("scores").u32(9).u32(6).u64(2).put(1.0f).put(2.0f);
    c.kvs.push_back(farr.b);
    const std::vector<uint8_t> good = c.build();
    gguf_context * ok = parse_buffer(good);
    ASSERT_NE(ok, nullptr) << gguf_last_error();
    const size_t data_end = gguf_get_data_offset(ok) + 48;
    gguf_free(ok);
    for (size_t n = 0; n < data_end; ++n) {
        const std::vector<uint8_t> cut(good.begin(), good.begin() + n);
        gguf_context * ctx = parse_buffer(cut);
        EXPECT_EQ(ctx, nullptr) << "cut at " << n;
        if (ctx) {
            gguf_free(ctx);
            continue;
        }
        const std::string err = gguf_last_error();
        const bool named = err.find("truncated") != std::string::npos || err.find("only ") != std::string::npos ||
                           err.find("past the end") != std::string::npos || err.find("bytes left") != std::string::npos ||
                           err.find("truncated or corrupt") != std::string::npos || err.find("strings needs") != std::string::npos;
        EXPECT_TRUE(named) << "cut at " << n << ": " << err;
    }
}

TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
    crafted c;
    bytes arr; arr.str("toks").u32(9).u32(8).u64(3).str("one").str("").str("three");
    c.kvs.push_back(arr.b);
    const std::vector<uint8_t> good = c.build();
    std::mt19937 rng(1234);
    int rejected = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<uint8_t> f = good;
        const int flips = 1 + (int) (rng() % 4);
        for (int k = 0; k < flips; ++k) {
            const size_t at = rng() % 200 < 190 ? rng() % std::min<size_t>(f.size(), 200) : rng() % f.size();
            f[at] = (uint8_t) rng();
        }
        gguf_context * ctx = parse_buffer(f);
        if (!ctx) {
            ++rejected;
            EXPECT_GT(std::strlen(gguf_last_error()), 0u);
            continue;
        }
        // whatever was accepted is self-consistent
        for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) {
            EXPECT_LE(gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, t) + gguf_get_tensor_size(ctx, t), f.size());
        }
        gguf_free(ctx);
    }
    EXPECT_GT(rejected, 1000);
}

// ---------------------------------------------------------------------------------------------
// Shared files

std::vector<std::string> shared_gguf_files() {
    std::vector<std::string> files;
    for (const char * dir : { "models", "vocab" }) {
        const std::string d = kiln_test::shared_path(dir);
        if (!fs::is_directory(d)) continue;
        for (const auto & e : fs::directory_iterator(d)) {
            if (e.path().extension() == ".gguf") files.push_back(e.path().string());
        }
    }
    files.push_back(kiln_test::shared_path("golden/quants.gguf"));
    std::sort(files.begin(), files.end());
    return files;
}

TEST(GgufShared, EveryModelAndVocabParses) {
    const std::vector<std::string> files = shared_gguf_files();
    ASSERT_GE(files.size(), 20u) << "shared files not found under " << kiln_test::shared_dir();
    for (const auto & f : files) {
        gguf_split * s = gguf_split_open(f.c_str());
        ASSERT_NE(s, nullptr) << gguf_last_error();
        const gguf_context * ctx = gguf_split_part(s, 0);
        EXPECT_EQ(gguf_get_version(ctx), 3u) << f;
        EXPECT_GT(gguf_get_n_kv(ctx), 0) << f;
        // every tensor lies inside the file, in order, without overlap
        size_t end = 0;
        for (int64_t t = 0; t < gguf_get_n_tensors(ctx); ++t) {
            EXPECT_GE(gguf_get_tensor_offset(ctx, t), end) << f;
            end = gguf_get_tensor_offset(ctx, t) + gguf_get_tensor_size(ctx, t);
        }
        // (vocab-only files have no data section, and their writer did not pad the header)
        if (gguf_get_n_tensors(ctx) > 0) EXPECT_LE(gguf_get_data_offset(ctx) + end, fs::file_size(f)) << f;
        if (f.find("/vocab/") != std::string::npos) {
            const int64_t id = gguf_find_key(ctx, "tokenizer.ggml.tokens");
            ASSERT_GE(id, 0) << f;
            EXPECT_EQ(gguf_get_arr_type(ctx, id), GGUF_TYPE_STRING) << f;
            EXPECT_GT(gguf_get_arr_n(ctx, id), 100u) << f;
        }
        gguf_split_free(s);
    }
}

TEST(GgufShared, StoriesFacts) {
    const std::string f = kiln_test::shared_path("models/stories260K.gguf");
    gguf_init_params params = { true, nullptr };
    gguf_context * ctx = gguf_init_from_file(f.c_str(), params);
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    const int64_t arch = gguf_find_key(ctx, "general.architecture");
    ASSERT_GE(arch, 0);
    EXPECT_STREQ(gguf_get_val_str(ctx, arch), "llama");
    const int64_t toks = gguf_find_key(ctx, "tokenizer.ggml.tokens");
    ASSERT_GE(toks, 0);
    EXPECT_EQ(gguf_get_arr_n(ctx, toks), 512u);   // golden/README.md: SPM vocab of 512
    const int64_t emb = gguf_find_tensor(ctx, "token_embd.weight");
    ASSERT_GE(emb, 0);
    EXPECT_EQ(gguf_get_tensor_ne(ctx, emb, 0), 64);   // n_embd 64
    EXPECT_EQ(gguf_get_tensor_ne(ctx, emb, 1), 512);
    EXPECT_EQ(gguf_get_tensor_type(ctx, emb), GGML_TYPE_F32);
    gguf_free(ctx);
}

// Reading a file written by the reference tools and writing it back gives the same bytes.
TEST(GgufShared, RewriteIsByteIdentical) {
    temp_dir tmp;
    for (const char * name : { "models/synth-qwen3moe-IQ4_KS.gguf", "models/synth-qwen3-Q8_0.gguf", "golden/quants.gguf" }) {
        const std::string f = kiln_test::shared_path(name);
        ggml_context * gctx = nullptr;
        gguf_init_params params = { false, &gctx };
        gguf_context * ctx = gguf_init_from_file(f.c_str(), params);
        ASSERT_NE(ctx, nullptr) << gguf_last_error();
        const std::string out = tmp.file("rewrite.gguf");
        ASSERT_TRUE(gguf_write_to_file(ctx, out.c_str(), false)) << gguf_last_error();
        const std::vector<uint8_t> a = read_all(f), b = read_all(out);
        EXPECT_EQ(a.size(), b.size()) << name;
        EXPECT_TRUE(a == b) << name << " differs after a rewrite";
        EXPECT_EQ(gguf_get_meta_size(ctx), gguf_get_data_offset(ctx)) << name;
        ggml_free(gctx);
        gguf_free(ctx);
    }
}

TEST(GgufPerf, LargeVocabParsesFast) {
    temp_dir tmp;
    const std::string path = tmp.file("vocab.gguf");
    const size_t n = 150000;
    std::vector<std::string> toks(n);
    std::vector<const char *> ptrs(n);
    std::vector<float> scores(n);
    for (size_t i = 0; i < n; ++i) {
        toks[i] = "tok_" + std::to_string(i * 7919 % 1000003);
        ptrs[i] = toks[i].c_str();
        scores[i] = -(float) i;
    }
    gguf_context * w = gguf_init_empty();
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", ptrs.data(), n);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", ptrs.data(), n);
    gguf_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), n);
    ASSERT_TRUE(gguf_write_to_file(w, path.c_str(), false)) << gguf_last_error();
    gguf_free(w);

    const auto t0 = std::chrono::steady_clock::now();
    gguf_init_params params = { true, nullptr };
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NE(ctx, nullptr) << gguf_last_error();
    const int64_t id = gguf_find_key(ctx, "tokenizer.ggml.tokens");
    ASSERT_EQ(gguf_get_arr_n(ctx, id), n);
    for (size_t i = 0; i < n; i += 9973) {
        EXPECT_STREQ(gguf_get_arr_str(ctx, id, i), toks[i].c_str());
        EXPECT_EQ(gguf_get_arr_str_len(ctx, id, i), toks[i].size());
    }
    gguf_free(ctx);
    // ~300k strings: a few ms when done right. Printed, not asserted: speed belongs to benchmarks,
    // and this suite also runs under the sanitizers.
    std::printf("parsing %zu strings took %.1f ms\n", 2 * n, ms);
}

// ---------------------------------------------------------------------------------------------
// Split models

TEST(GgufSplit, PathAndPrefix) {
    char buf[256];
    EXPECT_EQ(gguf_split_path(buf, sizeof(buf), "/m/model", 1, 3), (int) std::strlen("/m/model-00002-of-00003.gguf"));
    EXPECT_STREQ(buf, "/m/model-00002-of-00003.gguf");
    EXPECT_EQ(gguf_split_prefix(buf, sizeof(buf), "/m/model-00002-of-00003.gguf", 1, 3), 8);
    EXPECT_STREQ(buf, "/m/model");
    EXPECT_EQ(gguf_split_prefix(buf, sizeof(buf), "/m/model-00002-of-00003.gguf", 0, 3), 0);
    EXPECT_EQ(gguf_split_prefix(buf, sizeof(buf), "model.gguf", 0, 1), 0);
}

// Writes a 3-part split of 6 tensors (2 per part) under prefix; returns the part paths.
std::vector<std::string> write_split(const std::string & prefix, std::vector<std::vector<uint8_t>> & data, int32_t tensors_count = 6) {
    std::vector<std::string> paths;
    data.clear();
    for (int p = 0; p < 3; ++p) {
        gguf_context * ctx = gguf_init_empty();
        if (p == 0) gguf_set_val_str(ctx, "general.architecture", "llama");
        gguf_set_val_u16(ctx, GGUF_KEY_SPLIT_NO, (uint16_t) p);
        gguf_set_val_u16(ctx, GGUF_KEY_SPLIT_COUNT, 3);
        gguf_set_val_i32(ctx, GGUF_KEY_SPLIT_TENSORS_COUNT, tensors_count);
        for (int k = 0; k < 2; ++k) {
            data.push_back(random_bytes(64 * 4, (uint32_t) (p * 2 + k)));
            const std::string name = "blk." + std::to_string(p * 2 + k) + ".weight";
            ggml_tensor t = make_tensor(name.c_str(), GGML_TYPE_F32, { 64 }, data.back().data());
            gguf_add_tensor(ctx, &t);
        }
        char path[512];
        gguf_split_path(path, sizeof(path), prefix.c_str(), p, 3);
        EXPECT_TRUE(gguf_write_to_file(ctx, path, false)) << gguf_last_error();
        paths.push_back(path);
        gguf_free(ctx);
    }
    return paths;
}

TEST(GgufSplit, ThreePartsOpenAsOne) {
    temp_dir tmp;
    std::vector<std::vector<uint8_t>> data;
    const std::vector<std::string> paths = write_split(tmp.file("model"), data);
    EXPECT_EQ(paths[0], tmp.file("model-00001-of-00003.gguf"));

    gguf_split * s = gguf_split_open(paths[0].c_str());
    ASSERT_NE(s, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_split_n_parts(s), 3);
    EXPECT_EQ(gguf_split_n_tensors(s), 6);
    for (int p = 0; p < 3; ++p) {
        EXPECT_EQ(paths[p], gguf_split_part_path(s, p));
        EXPECT_EQ(gguf_split_count(gguf_split_part(s, p)), 3);
    }
    for (int i = 0; i < 6; ++i) {
        const std::string name = "blk." + std::to_string(i) + ".weight";
        int part = -1;
        const int64_t id = gguf_split_find_tensor(s, name.c_str(), &part);
        ASSERT_EQ(part, i / 2) << name;
        ASSERT_EQ(id, i % 2) << name;
        // the tensor's bytes are where the part says
        const gguf_context * ctx = gguf_split_part(s, part);
        const std::vector<uint8_t> file = read_all(paths[part]);
        const size_t off = gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, id);
        EXPECT_EQ(std::memcmp(file.data() + off, data[i].data(), data[i].size()), 0) << name;
    }
    int part = 7;
    EXPECT_EQ(gguf_split_find_tensor(s, "nope", &part), -1);
    EXPECT_EQ(part, -1);
    gguf_split_free(s);

    // an unsplit file is a model of one part
    const std::string single = tmp.file("single.gguf");
    {
        gguf_context * ctx = gguf_init_empty();
        gguf_set_val_str(ctx, "general.architecture", "llama");
        ASSERT_TRUE(gguf_write_to_file(ctx, single.c_str(), false));
        EXPECT_EQ(gguf_split_count(ctx), 1);
        gguf_free(ctx);
    }
    s = gguf_split_open(single.c_str());
    ASSERT_NE(s, nullptr) << gguf_last_error();
    EXPECT_EQ(gguf_split_n_parts(s), 1);
    gguf_split_free(s);
}

TEST(GgufSplit, Errors) {
    temp_dir tmp;
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::string> paths = write_split(tmp.file("model"), data);

    // opening a later part
    EXPECT_EQ(gguf_split_open(paths[1].c_str()), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("part 2 of a 3-part split model; open the first part"), std::string::npos)
        << gguf_last_error();

    // the first part renamed: the other parts cannot be found from its name
    const std::string renamed = tmp.file("renamed.gguf");
    fs::copy_file(paths[0], renamed);
    EXPECT_EQ(gguf_split_open(renamed.c_str()), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("must be named <prefix>-00001-of-00003.gguf"), std::string::npos)
        << gguf_last_error();

    // wrong total tensor count
    paths = write_split(tmp.file("bad"), data, 7);
    EXPECT_EQ(gguf_split_open(paths[0].c_str()), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("'split.tensors.count' is 7, but the 3 parts hold 6 tensors"), std::string::npos)
        << gguf_last_error();

    // a part with the wrong split.no
    paths = write_split(tmp.file("swap"), data);
    fs::rename(paths[1], tmp.file("x"));
    fs::rename(paths[2], paths[1]);
    fs::rename(tmp.file("x"), paths[2]);
    EXPECT_EQ(gguf_split_open(paths[0].c_str()), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("'split.no' is 2, expected 1"), std::string::npos) << gguf_last_error();

    // a missing part is named
    paths = write_split(tmp.file("gone"), data);
    fs::remove(paths[2]);
    EXPECT_EQ(gguf_split_open(paths[0].c_str()), nullptr);
    const std::string err = gguf_last_error();
    EXPECT_NE(err.find("split part 3 of 3 is missing: " + paths[2]), std::string::npos) << err;
}

} // namespace
