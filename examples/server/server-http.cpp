#include "server-http.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

thread_local int t_connection_socket = -1;
thread_local bool t_close_after_response = false;

// Waits until fd is ready for events, for at most timeout_ms; false on timeout or error.
bool wait_for(int fd, short events, int64_t timeout_ms) {
    pollfd p{ fd, events, 0 };
    for (;;) {
        const int r = poll(&p, 1, (int) timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
    }
}

void address_of(int fd, bool peer, std::string & ip, int & port) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ip.clear();
    port = -1;
    if ((peer ? getpeername(fd, (sockaddr *) &ss, &len) : getsockname(fd, (sockaddr *) &ss, &len)) != 0) return;
    char host[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto * a = (const sockaddr_in *) &ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto * a = (const sockaddr_in6 *) &ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    ip = host;
}

// The newest OpenSSL error as text (and the queue emptied).
std::string openssl_error() {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) return "unknown error";
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

// One connection's byte stream (plain, or TLS through ssl), with the server's read and write timeouts.
class connection_stream : public httplib::Stream {
public:
    connection_stream(int fd, SSL * ssl, int64_t read_timeout_ms, int64_t write_timeout_ms)
        : fd_(fd), ssl_(ssl), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

    // TLS may hold decrypted bytes that the socket no longer signals
    bool is_readable() const override { return (ssl_ && SSL_pending(ssl_) > 0) || wait_for(fd_, POLLIN, read_timeout_ms_); }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_) && !peer_hung_up(fd_); }

    ssize_t read(char * ptr, size_t size) override {
        if (!is_readable()) return -1;
        if (ssl_) {
            const int n = SSL_read(ssl_, ptr, (int) std::min<size_t>(size, INT32_MAX));
            return n > 0 ? n : SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
        }
        for (;;) {
            const ssize_t n = recv(fd_, ptr, size, 0);
            if (n < 0 && errno == EINTR) continue;
            return n;
        }
    }
    ssize_t write(const char * ptr, size_t size) override {
        if (!is_writable()) return -1;
        if (ssl_) {
            const int n = SSL_write(ssl_, ptr, (int) std::min<size_t>(size, INT32_MAX));
            return n > 0 ? n : -1;
        }
        for (;;) {
            const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            return n;
        }
    }
    void get_remote_ip_and_port(std::string & ip, int & port) const override { address_of(fd_, true, ip, port); }
    void get_local_ip_and_port(std::string & ip, int & port) const override { address_of(fd_, false, ip, port); }
    socket_t socket() const override { return fd_; }

private:
    int fd_;
    SSL * ssl_;
    int64_t read_timeout_ms_, write_timeout_ms_;
};

} // namespace

kiln_http_server::~kiln_http_server() {
    if (tls_ctx_) SSL_CTX_free(tls_ctx_);
}

bool kiln_http_server::enable_tls(const std::string & cert_file, const std::string & key_file, std::string & err) {
    SSL_CTX * ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        err = "TLS: " + openssl_error();
        return false;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
        err = "--ssl-cert-file '" + cert_file + "': " + openssl_error();
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        err = "--ssl-key-file '" + key_file + "': " + openssl_error();
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        err = "--ssl-key-file '" + key_file + "' is not the key of --ssl-cert-file '" + cert_file + "'";
    } else {
        tls_ctx_ = ctx;
        return true;
    }
    SSL_CTX_free(ctx);
    return false;
}

bool kiln_http_server::process_and_close_socket(socket_t sock) {
    const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
    const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
    SSL * ssl = nullptr;
    if (tls_ctx_) {
        // the handshake blocks on the socket: the timeouts bound a client that stalls in it
        const timeval rt{ (time_t) (read_ms / 1000), (suseconds_t) (read_ms % 1000 * 1000) };
        const timeval wt{ (time_t) (write_ms / 1000), (suseconds_t) (write_ms % 1000 * 1000) };
        setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof rt);
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
        ssl = SSL_new(tls_ctx_);
        if (!ssl || SSL_set_fd(ssl, sock) != 1 || SSL_accept(ssl) != 1) {
            ERR_clear_error();
            if (ssl) SSL_free(ssl);
            shutdown(sock, SHUT_RDWR);
            close(sock);
            return false;
        }
    }
    t_connection_socket = sock;
    connection_stream strm(sock, ssl, read_ms, write_ms);
    bool ok = false;
    // keep-alive: up to keep_alive_max_count_ requests, each waited for at most
    // keep_alive_timeout_sec_, in short polls so that stop() is noticed
    for (size_t left = keep_alive_max_count_; left > 0 && is_running(); --left) {
        bool ready = false;
        for (int64_t waited = 0; waited < keep_alive_timeout_sec_ * 1000 && is_running(); waited += 100) {
            if ((ready = (ssl && SSL_pending(ssl) > 0) || wait_for(sock, POLLIN, 100))) break;
        }
        if (!ready) break;
        bool closed = false;
        t_close_after_response = false;
        ok = process_request(strm, left == 1 || !is_running(), closed, nullptr);
        if (!ok || closed || t_close_after_response) break;
    }
    t_connection_socket = -1;
    if (ssl) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
}

int current_connection_socket() { return t_connection_socket; }

void close_connection_after_response() { t_close_after_response = true; }

bool peer_hung_up(int fd) {
    if (fd < 0) return false;
    pollfd p{ fd, (short) POLLRDHUP, 0 };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}
