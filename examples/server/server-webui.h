// The chat page at / (sources in webui/ at the top of the repository; see webui/README.md). The
// built page is one gzip-compressed HTML file embedded in the binary at build time.
#pragma once

#include <httplib.h>

#include <string>

// GET / and /index.html answer the page.
void register_webui_routes(httplib::Server & svr);
// The page's own paths: served while the model loads and without an API key, because the page
// itself waits for the model and asks for the key.
bool is_webui_path(const std::string & path);
