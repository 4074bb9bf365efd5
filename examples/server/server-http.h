// The HTTP server with a handle on each request's connection. Debian's cpp-httplib (0.11) gives
// handlers no access to their socket and cannot tell them that a client has gone, so a server
// that waits for a slot would go on generating for nobody. httplib serves each connection start
// to end on one pool thread through a virtual per-connection entry point; kiln_http_server
// supplies that entry point itself (the keep-alive loop around httplib's request processing) and
// records the connection's socket for the thread, where the handlers find it.
#pragma once

#include <httplib.h>

// With enable_tls (--ssl-cert-file / --ssl-key-file) each connection speaks TLS (OpenSSL), in the
// same loop: httplib's own SSLServer would bypass it.
class kiln_http_server : public httplib::Server {
public:
    ~kiln_http_server() override;
    // Loads the PEM certificate chain and private key; false with err naming the file at fault.
    bool enable_tls(const std::string & cert_file, const std::string & key_file, std::string & err);
    bool tls() const { return tls_ctx_ != nullptr; }

private:
    bool process_and_close_socket(socket_t sock) override;
    struct ssl_ctx_st * tls_ctx_ = nullptr;
};

// The socket of the connection the calling thread is serving (in a handler or a content
// provider of kiln_http_server); -1 elsewhere.
int current_connection_socket();
// Close the calling thread's connection once the current response is written. For a request
// answered before its body was read (refused by the API key check, or while loading): what is
// left of the body must not be parsed as the next request on the connection.
void close_connection_after_response();
// The peer closed its end (or the connection failed). Never blocks.
bool peer_hung_up(int fd);
