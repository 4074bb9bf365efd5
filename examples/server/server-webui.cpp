// Serving the embedded web UI. Browsers accept gzip and get the stored bytes as they are
// (Content-Encoding: gzip); a client that does not gets the page inflated (once, on first use).
// Both go out through a content provider of known length, which cpp-httplib sends unchanged: a
// body set with set_content() would be compressed again for clients that accept br or gzip.
#include "server-webui.h"

#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>

// cmake/embed-file.cmake generates these from webui/dist/index.html.gz
extern const unsigned char kiln_webui_index_html_gz[];
extern const size_t kiln_webui_index_html_gz_size;

namespace {

std::string_view bundle_gz() {
    return { reinterpret_cast<const char *>(kiln_webui_index_html_gz), kiln_webui_index_html_gz_size };
}

std::string gunzip(std::string_view gz) {
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("web UI: inflateInit2 failed");
    zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(gz.data()));
    zs.avail_in = (uInt) gz.size();
    std::string out;
    char buf[64 * 1024];
    int rc = Z_OK;
    while (rc == Z_OK) {
        zs.next_out = reinterpret_cast<Bytef *>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        out.append(buf, sizeof buf - zs.avail_out);
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) throw std::runtime_error("web UI: the embedded page is not valid gzip");
    return out;
}

const std::string & bundle_html() {
    static const std::string html = gunzip(bundle_gz());
    return html;
}

// The page's validator: it changes exactly when the embedded bytes do. Weak, because the gzip and
// the plain response share it.
const std::string & bundle_etag() {
    static const std::string etag = [] {
        uint64_t h = 1469598103934665603ull;   // FNV-1a
        for (char c : bundle_gz()) h = (h ^ (unsigned char) c) * 1099511628211ull;
        char s[32];
        std::snprintf(s, sizeof s, "W/\"%016llx\"", (unsigned long long) h);
        return std::string(s);
    }();
    return etag;
}

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return std::string(s);
}

// Accept-Encoding: "gzip, deflate, br", "gzip;q=0.5", "*", "identity, gzip;q=0", ...
bool accepts_gzip(const std::string & header) {
    bool gzip = false, any = false;
    bool gzip_named = false;
    std::string_view rest = header;
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const size_t semi = item.find(';');
        std::string coding = trim(item.substr(0, semi));
        for (char & c : coding) c = (char) std::tolower((unsigned char) c);
        double q = 1.0;
        if (semi != std::string_view::npos) {
            const std::string param = trim(item.substr(semi + 1));
            if (param.size() > 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') q = std::atof(param.c_str() + 2);
        }
        if (coding == "gzip" || coding == "x-gzip") {
            gzip_named = true;
            gzip = q > 0;
        } else if (coding == "*") {
            any = q > 0;
        }
    }
    return gzip_named ? gzip : any;
}

bool etag_matches(const std::string & if_none_match) {
    if (trim(if_none_match) == "*") return true;
    // weak comparison: W/ or not, the quoted value decides
    return if_none_match.find(bundle_etag().substr(2)) != std::string::npos;
}

void serve_page(const httplib::Request & req, httplib::Response & res) {
    res.set_header("ETag", bundle_etag());
    res.set_header("Cache-Control", "no-cache");   // revalidate: a new binary serves a new page
    res.set_header("Vary", "Accept-Encoding");
    res.set_header("X-Content-Type-Options", "nosniff");
    if (req.has_header("If-None-Match") && etag_matches(req.get_header_value("If-None-Match"))) {
        res.status = 304;
        return;
    }
    const bool gzip = accepts_gzip(req.get_header_value("Accept-Encoding"));
    const std::string_view body = gzip ? bundle_gz() : std::string_view(bundle_html());
    if (gzip) res.set_header("Content-Encoding", "gzip");
    res.set_content_provider(body.size(), "text/html; charset=utf-8",
                             [body](size_t offset, size_t length, httplib::DataSink & sink) {
                                 return sink.write(body.data() + offset, length);
                             });
}

} // namespace

bool is_webui_request(const httplib::Request & req, const std::string & dir) {
    if (req.method != "GET" && req.method != "HEAD") return false;
    if (req.path == "/" || req.path == "/index.html") return true;
    if (dir.empty()) return false;
    // a file of dir: httplib serves it (and refuses ".." itself); only asked here, so that a ".."
    // never names a file outside
    const std::filesystem::path rel = std::filesystem::path(req.path).relative_path();
    for (const auto & part : rel) {
        if (part == "..") return false;
    }
    std::error_code ec;
    return std::filesystem::is_regular_file(std::filesystem::path(dir) / rel, ec);
}

bool register_webui_routes(httplib::Server & svr, const std::string & dir) {
    if (!dir.empty()) return svr.set_mount_point("/", dir);
    svr.Get("/", serve_page);
    svr.Get("/index.html", serve_page);
    return true;
}
