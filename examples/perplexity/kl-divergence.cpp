// The --kl-divergence pass: evaluate the chunks stored in a base file (written by this tool or by
// llama.cpp / ik_llama.cpp with --kl-divergence-base) and compare every scored position's
// distribution with the stored one: perplexities and their ratio, KL-divergence, the change of
// the probability of the observed token (Δp) and top-token agreement, with the uncertainties and
// the report layout llama.cpp uses.
#include "perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace {

struct kld_sums {
    double nll = 0, nll2 = 0;             // ours: -log p(observed token)
    double nll_base = 0, nll_base2 = 0;   // the base's
    double nll_nll_base = 0;
    double kld = 0, kld2 = 0;
    double p_diff = 0, p_diff2 = 0, p_diff4 = 0;
    size_t n_same_top = 0;
    size_t count = 0;
};

// mean and its standard error (0 below 11 samples, as llama.cpp)
std::pair<double, double> mean_and_error(double sum, double sum2, size_t n) {
    if (n < 1) return { 0.0, 0.0 };
    const double mean = sum / n;
    double var = sum2 / n - mean * mean;
    var = var > 0 && n > 10 ? std::sqrt(var / (n - 1)) : 0.0;
    return { mean, var };
}

double covariance(double sum_a, double sum_b, double sum_ab, size_t n) {
    if (n < 10) return 0.0;
    return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

// Compares one position; returns its KLD and sets p_diff (our p of the observed token minus the base's).
double compare_position(const float * logits, int32_t n_vocab, const uint16_t * record, int32_t tok, kld_sums & s,
                        float & p_diff) {
    float mx = logits[0];
    int32_t top = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > mx) {
            mx = logits[i];
            top = i;
        }
    }
    double sum_exp = 0;
    for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp((double) logits[i] - mx);
    const double log_z = mx + std::log(sum_exp);

    float scale, min_log_prob;
    std::memcpy(&scale, record, sizeof(float));
    std::memcpy(&min_log_prob, record + 2, sizeof(float));
    const uint16_t * q = record + 4;

    const double nll = log_z - logits[tok];
    const double nll_base = -((double) scale * q[tok] + min_log_prob);
    s.nll += nll;
    s.nll2 += nll * nll;
    s.nll_base += nll_base;
    s.nll_base2 += nll_base * nll_base;
    s.nll_nll_base += nll * nll_base;

    // KL(base || ours); base entries below e^-16 are left out as llama.cpp does (their
    // stored values are clamped and would only add quantization noise)
    double kld = 0;
    int32_t top_base = 0;
    float best_base = 0;
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float lp_base = scale * q[i] + min_log_prob;
        if (i == 0 || lp_base > best_base) {
            best_base = lp_base;
            top_base = i;
        }
        if (lp_base > -16.0f) kld += std::exp((double) lp_base) * ((double) lp_base - ((double) logits[i] - log_z));
    }
    s.kld += kld;
    s.kld2 += kld * kld;
    ++s.count;
    s.n_same_top += top == top_base;

    p_diff = (float) (std::exp(-nll) - std::exp(-nll_base));
    const double d2 = (double) p_diff * p_diff;
    s.p_diff += p_diff;
    s.p_diff2 += d2;
    s.p_diff4 += d2 * d2;
    return kld;
}

// Linear interpolation between the neighbouring sorted values.
float percentile(const std::vector<float> & sorted, float fraction) {
    if (fraction <= 0) return sorted.front();
    if (fraction >= 1) return sorted.back();
    float p = fraction * (sorted.size() - 1);
    const size_t ip = (size_t) p;
    p -= ip;
    return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(const std::vector<float> & sorted) {
    const size_t n = sorted.size();
    return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

void print_chunk_row(int chunk, const kld_sums & s) {
    std::printf("%4d", chunk);
    const auto log_ppl = mean_and_error(s.nll, s.nll2, s.count);
    const double ppl = std::exp(log_ppl.first);
    std::printf("    %9.4lf ± %9.4lf", ppl, ppl * log_ppl.second);

    const auto log_ppl_base = mean_and_error(s.nll_base, s.nll_base2, s.count);
    const double cov = covariance(s.nll, s.nll_base, s.nll_nll_base, s.count);
    const double ratio = log_ppl.first - log_ppl_base.first;
    const double ratio_err = std::sqrt(log_ppl.second * log_ppl.second + log_ppl_base.second * log_ppl_base.second - 2.0 * cov);
    std::printf("    %10.5lf ± %10.5lf", ratio, ratio_err);

    const auto kl = mean_and_error(s.kld, s.kld2, s.count);
    std::printf("    %10.5lf ± %10.5lf", kl.first, kl.second);

    const auto mse = mean_and_error(s.p_diff2, s.p_diff4, s.count);
    const double rms = std::sqrt(mse.first);
    std::printf("    %6.3lf ± %6.3lf %%", 100.0 * rms, rms > 0 ? 100.0 * 0.5 / rms * mse.second : 0.0);

    const double top = (double) s.n_same_top / s.count;
    std::printf("    %6.3lf ± %6.3lf %%", 100.0 * top, s.count > 1 ? 100.0 * std::sqrt(top * (1 - top) / (s.count - 1)) : 0.0);
    std::printf("\n");
    std::fflush(stdout);
}

void print_report(const kld_sums & s, std::vector<float> & kld_values, std::vector<float> & p_diff_values) {
    std::sort(kld_values.begin(), kld_values.end());
    std::sort(p_diff_values.begin(), p_diff_values.end());

    std::printf("====== Perplexity statistics ======\n");
    const auto log_ppl = mean_and_error(s.nll, s.nll2, s.count);
    const double ppl = std::exp(log_ppl.first);
    const double ppl_err = ppl * log_ppl.second;
    std::printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl, ppl_err);
    const auto log_ppl_base = mean_and_error(s.nll_base, s.nll_base2, s.count);
    const double ppl_base = std::exp(log_ppl_base.first);
    const double ppl_base_err = ppl_base * log_ppl_base.second;
    std::printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", ppl_base, ppl_base_err);
    const double cov = covariance(s.nll, s.nll_base, s.nll_nll_base, s.count);
    const double cor = cov / (log_ppl.second * log_ppl_base.second);
    std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cor);
    const double ratio = log_ppl.first - log_ppl_base.first;
    const double ratio_err = std::sqrt(log_ppl.second * log_ppl.second + log_ppl_base.second * log_ppl_base.second - 2.0 * cov);
    std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", ratio, ratio_err);
    const double ppl_ratio = std::exp(ratio);
    std::printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", ppl_ratio, ppl_ratio * ratio_err);
    const double ppl_cov = ppl * ppl_base * cov;
    const double diff_err = std::sqrt(ppl_err * ppl_err + ppl_base_err * ppl_base_err - 2.0 * ppl_cov);
    std::printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", ppl - ppl_base, diff_err);
    std::printf("\n");

    std::printf("====== KL divergence statistics ======\n");
    const auto kl = mean_and_error(s.kld, s.kld2, s.count);
    std::printf("Mean    KLD: %10.6lf ± %10.6lf\n", kl.first, kl.second);
    std::printf("Maximum KLD: %10.6f\n", kld_values.back());
    std::printf("99.9%%   KLD: %10.6f\n", percentile(kld_values, 0.999f));
    std::printf("99.0%%   KLD: %10.6f\n", percentile(kld_values, 0.990f));
    std::printf("95.0%%   KLD: %10.6f\n", percentile(kld_values, 0.950f));
    std::printf("90.0%%   KLD: %10.6f\n", percentile(kld_values, 0.900f));
    std::printf("Median  KLD: %10.6f\n", median(kld_values));
    std::printf("10.0%%   KLD: %10.6f\n", percentile(kld_values, 0.100f));
    std::printf(" 5.0%%   KLD: %10.6f\n", percentile(kld_values, 0.050f));
    std::printf(" 1.0%%   KLD: %10.6f\n", percentile(kld_values, 0.010f));
    std::printf(" 0.1%%   KLD: %10.6f\n", percentile(kld_values, 0.001f));
    std::printf("Minimum KLD: %10.6f\n", kld_values.front());
    std::printf("\n");

    std::printf("====== Token probability statistics ======\n");
    const auto pd = mean_and_error(s.p_diff, s.p_diff2, s.count);
    std::printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * pd.first, 100.0 * pd.second);
    std::printf("Maximum Δp: %6.3lf%%\n", 100.0 * p_diff_values.back());
    std::printf("99.9%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.999f));
    std::printf("99.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.990f));
    std::printf("95.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.950f));
    std::printf("90.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.900f));
    std::printf("75.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.750f));
    std::printf("Median  Δp: %6.3lf%%\n", 100.0 * median(p_diff_values));
    std::printf("25.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.250f));
    std::printf("10.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.100f));
    std::printf(" 5.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.050f));
    std::printf(" 1.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.010f));
    std::printf(" 0.1%%   Δp: %6.3lf%%\n", 100.0 * percentile(p_diff_values, 0.001f));
    std::printf("Minimum Δp: %6.3lf%%\n", 100.0 * p_diff_values.front());
    const auto mse = mean_and_error(s.p_diff2, s.p_diff4, s.count);
    const double rms = std::sqrt(mse.first);
    std::printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * rms, rms > 0 ? 100.0 * 0.5 / rms * mse.second : 0.0);
    const double top = (double) s.n_same_top / s.count;
    std::printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * top, 100.0 * std::sqrt(top * (1.0 - top) / (s.count - 1)));
    std::fflush(stdout);
}

} // namespace

int kl_divergence_run(llama_context * ctx, const common_params & params) {
    const std::string & path = params.logits_file;
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) {
        LOG_ERR("kl_divergence: error: cannot open %s\n", path.c_str());
        return 1;
    }
    struct closer {
        FILE * f;
        ~closer() { std::fclose(f); }
    } close_f{ f };

    char magic[8];
    int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "_logits_", 8) != 0 || std::fread(&n_ctx, 4, 1, f) != 1 ||
        std::fread(&n_vocab, 4, 1, f) != 1 || std::fread(&n_chunk, 4, 1, f) != 1) {
        LOG_ERR("kl_divergence: error: %s: truncated header (expected _logits_, n_ctx, n_vocab, n_chunk)\n", path.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const int32_t n_vocab_model = llama_vocab_n_tokens(vocab);
    if (n_ctx < 4 || n_ctx > (int32_t) llama_n_ctx(ctx)) {
        LOG_ERR("kl_divergence: error: %s: n_ctx %d does not fit the context (%u)\n", path.c_str(), n_ctx, llama_n_ctx(ctx));
        return 1;
    }
    if (n_vocab != n_vocab_model) {
        LOG_ERR("kl_divergence: error: %s: vocabulary of %d tokens, the model has %d\n", path.c_str(), n_vocab, n_vocab_model);
        return 1;
    }
    if (n_chunk < 1) {
        LOG_ERR("kl_divergence: error: %s: n_chunk %d (must be at least 1)\n", path.c_str(), n_chunk);
        return 1;
    }
    const int32_t first = n_ctx / 2;
    const int32_t n_scored = n_ctx - 1 - first;
    const size_t nv = kld_record_size(n_vocab);
    {
        // the whole file must be there before any work is done
        const long pos = std::ftell(f);
        std::fseek(f, 0, SEEK_END);
        const long size = std::ftell(f);
        std::fseek(f, pos, SEEK_SET);
        const double expected = 20.0 + 4.0 * n_ctx * (double) n_chunk + 2.0 * nv * n_scored * (double) n_chunk;
        if ((double) size < expected) {
            LOG_ERR("kl_divergence: error: %s: %ld bytes, but n_ctx=%d, n_vocab=%d, n_chunk=%d need %.0f\n", path.c_str(), size,
                    n_ctx, n_vocab, n_chunk, expected);
            return 1;
        }
    }
    std::vector<llama_token> tokens((size_t) n_ctx * n_chunk);
    if (std::fread(tokens.data(), sizeof(llama_token), tokens.size(), f) != tokens.size()) {
        LOG_ERR("kl_divergence: error: %s: cannot read the tokens\n", path.c_str());
        return 1;
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            LOG_ERR("kl_divergence: error: %s: token %zu is %d, outside the vocabulary\n", path.c_str(), i, tokens[i]);
            return 1;
        }
    }

    const int32_t n_run = params.n_chunks < 0 ? n_chunk : std::min(params.n_chunks, n_chunk);
    const int32_t n_batch = std::min(params.n_batch, n_ctx);
    const llama_token bos = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : -1;
    LOG_INF("kl_divergence: %d chunks of n_ctx=%d from %s, batch_size=%d\n", n_run, n_ctx, path.c_str(), n_batch);

    std::vector<uint16_t> records((size_t) n_scored * nv);
    std::vector<float> logits, kld_values, p_diff_values;
    kld_values.reserve((size_t) n_scored * n_run);
    p_diff_values.reserve((size_t) n_scored * n_run);
    kld_sums sums;

    for (int32_t c = 0; c < n_run; ++c) {
        const auto t0 = std::chrono::steady_clock::now();
        if (std::fread(records.data(), sizeof(uint16_t), records.size(), f) != records.size()) {
            LOG_ERR("kl_divergence: error: %s: cannot read the log-probs of chunk %d\n", path.c_str(), c + 1);
            return 1;
        }
        if (!ppl_eval_chunk(ctx, tokens.data() + (size_t) c * n_ctx, n_ctx, n_batch, first, bos, logits)) return 1;
        if (c == 0) {
            ppl_print_eta(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), n_run);
            std::printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n");
        }
        for (int32_t k = 0; k < n_scored; ++k) {
            float p_diff = 0;
            const double kld = compare_position(logits.data() + (size_t) k * n_vocab, n_vocab, records.data() + k * nv,
                                                tokens[(size_t) c * n_ctx + first + k + 1], sums, p_diff);
            kld_values.push_back((float) kld);
            p_diff_values.push_back(p_diff);
        }
        print_chunk_row(c + 1, sums);
    }
    std::printf("\n");
    if (sums.count < 100) {
        LOG_WRN("kl_divergence: only %zu positions: too few for the statistics report\n", sums.count);
        return 0;
    }
    print_report(sums, kld_values, p_diff_values);
    return 0;
}
