// A map from tensor pointers to small integers, for the planner and the scheduler: open
// addressing in vectors that keep their capacity, so planning the same graph shape again
// allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

class ggml_ptr_map {
public:
    // Forget every key; keep the memory. Sized for at least n keys.
    void reset(size_t n) {
        size_t cap = 16;
        while (cap < 2 * n + 1) cap <<= 1;
        if (keys_.size() < cap) {
            keys_.assign(cap, nullptr);
            values_.assign(cap, -1);
        } else {
            std::fill(keys_.begin(), keys_.end(), nullptr);
        }
        mask_ = keys_.size() - 1;
        count_ = 0;
    }

    // The value of key, or -1.
    int get(const void * key) const {
        if (keys_.empty()) return -1;
        for (size_t i = slot(key);; i = (i + 1) & mask_) {
            if (keys_[i] == key) return values_[i];
            if (keys_[i] == nullptr) return -1;
        }
    }

    void set(const void * key, int value) {
        if (2 * (count_ + 1) > keys_.size()) grow();
        for (size_t i = slot(key);; i = (i + 1) & mask_) {
            if (keys_[i] == key) {
                values_[i] = value;
                return;
            }
            if (keys_[i] == nullptr) {
                keys_[i] = key;
                values_[i] = value;
                ++count_;
                return;
            }
        }
    }

    size_t size() const { return count_; }

private:
    size_t slot(const void * key) const {
        uint64_t h = (uint64_t) (uintptr_t) key;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        return (size_t) h & mask_;
    }

    void grow() {
        std::vector<const void *> old_keys;
        std::vector<int> old_values;
        old_keys.swap(keys_);
        old_values.swap(values_);
        const size_t cap = old_keys.empty() ? 16 : 2 * old_keys.size();
        keys_.assign(cap, nullptr);
        values_.assign(cap, -1);
        mask_ = cap - 1;
        count_ = 0;
        for (size_t i = 0; i < old_keys.size(); ++i) {
            if (old_keys[i]) set(old_keys[i], old_values[i]);
        }
    }

    std::vector<const void *> keys_;
    std::vector<int> values_;
    size_t mask_ = 0;
    size_t count_ = 0;
};
