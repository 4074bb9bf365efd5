#include "server-http.h"

#include <arpa/inet.h>
#include <cerrno>
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

// One connection's byte stream, with the server's read and write timeouts.
class connection_stream : public httplib::Stream {
public:
    connection_stream(int fd, int64_t read_timeout_ms, int64_t write_timeout_ms)
        : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

    bool is_readable() const override { return wait_for(fd_, POLLIN, read_timeout_ms_); }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_) && !peer_hung_up(fd_); }

    ssize_t read(char * ptr, size_t size) override {
        if (!is_readable()) return -1;
        for (;;) {
            const ssize_t n = recv(fd_, ptr, size, 0);
            if (n < 0 && errno == EINTR) continue;
            return n;
        }
    }
    ssize_t write(const char * ptr, size_t size) override {
        if (!is_writable()) return -1;
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
    int64_t read_timeout_ms_, write_timeout_ms_;
};

} // namespace

bool kiln_http_server::process_and_close_socket(socket_t sock) {
    t_connection_socket = sock;
    connection_stream strm(sock, read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000,
                           write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
    bool ok = false;
    // keep-alive: up to keep_alive_max_count_ requests, each waited for at most
    // keep_alive_timeout_sec_, in short polls so that stop() is noticed
    for (size_t left = keep_alive_max_count_; left > 0 && is_running(); --left) {
        bool ready = false;
        for (int64_t waited = 0; waited < keep_alive_timeout_sec_ * 1000 && is_running(); waited += 100) {
            if ((ready = wait_for(sock, POLLIN, 100))) break;
        }
        if (!ready) break;
        bool closed = false;
        t_close_after_response = false;
        ok = process_request(strm, left == 1 || !is_running(), closed, nullptr);
        if (!ok || closed || t_close_after_response) break;
    }
    t_connection_socket = -1;
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
