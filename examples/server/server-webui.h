// The chat page at / (sources in webui/ at the top of the repository; see webui/README.md). The
// built page is one gzip-compressed HTML file embedded in the binary at build time; --path DIR
// serves a directory's files instead, as llama.cpp does.
#pragma once

#include <httplib.h>

#include <string>

// GET / and /index.html answer the built-in page, or, with a dir, GET of any file in it (/ is its
// index.html). False when dir cannot be served (it was checked when parsed, and is gone).
bool register_webui_routes(httplib::Server & svr, const std::string & dir);
// A request for the page or one of its files: answered while the model loads and without an
// API key, because the page itself waits for the model and asks for the key.
bool is_webui_request(const httplib::Request & req, const std::string & dir);
