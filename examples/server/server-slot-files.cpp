#include "server-slot-files.h"

#include <filesystem>

namespace {

// A plain file name: no directory parts (so the file stays inside --slot-save-path), no "." or
// "..", no control characters, at most 255 bytes.
bool plain_file_name(const std::string & name) {
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    for (unsigned char c : name) {
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == ':') return false;
    }
    return true;
}

int32_t slot_id_of(const std::string & text) {
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
        throw http_error(400, "'" + text + "' is not a slot id (a number)");
    }
    return (int32_t) std::stol(text);
}

} // namespace

bool prepare_slot_save_dir(const std::string & dir, std::string & err) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
        err = "--slot-save-path '" + dir + "' is not a directory that can be created: " + ec.message();
        return false;
    }
    return true;
}

json run_slot_file_action(slot_engine & engine, const std::string & save_dir, const std::string & id_text,
                          const std::string & action, const json & body) {
    const int32_t id = slot_id_of(id_text);
    slot_action_kind kind;
    if (action == "save") kind = slot_action_kind::save;
    else if (action == "restore") kind = slot_action_kind::restore;
    else if (action == "erase") kind = slot_action_kind::erase;
    else throw http_error(400, "'action' must be save, restore or erase (got '" + action + "')");

    std::string filename, path;
    if (kind != slot_action_kind::erase) {
        if (save_dir.empty()) {
            throw http_error(501, "slot files are off: start the server with --slot-save-path DIR", "not_supported_error");
        }
        if (!body.is_object() || !body.contains("filename") || !body["filename"].is_string()) {
            throw http_error(400, "'filename' must be a string (a file name in the --slot-save-path directory)");
        }
        filename = body["filename"].get<std::string>();
        if (!plain_file_name(filename)) {
            throw http_error(400, "'filename' must be a plain file name, without directories or '..' (got '" + filename + "')");
        }
        path = (std::filesystem::path(save_dir) / filename).string();
    }
    const slot_action_result r = engine.slot_action(id, kind, path);
    if (r.status != 200) throw http_error(r.status, r.error);
    switch (kind) {
        case slot_action_kind::save:
            return { { "id_slot", id }, { "filename", filename }, { "n_saved", r.n_tokens }, { "n_written", r.n_bytes },
                     { "timings", { { "save_ms", r.ms } } } };
        case slot_action_kind::restore:
            return { { "id_slot", id }, { "filename", filename }, { "n_restored", r.n_tokens }, { "n_read", r.n_bytes },
                     { "timings", { { "restore_ms", r.ms } } } };
        case slot_action_kind::erase:
            break;
    }
    return { { "id_slot", id }, { "n_erased", r.n_tokens } };
}
